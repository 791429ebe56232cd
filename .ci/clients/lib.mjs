// Shared harness for the client scripts: temporary roots, the mcp-confirm
// binary over HTTP, filesystem assertions, per-case and per-script timeouts,
// and the one-line-per-scenario report that run.sh counts.
//
// Every assertion about what happened is made on the filesystem, never only
// on what the server said.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The binary under test; run.sh builds it and sets MCP_CONFIRM_BIN. */
export function binary() {
  const bin = process.env.MCP_CONFIRM_BIN;
  if (!bin || !fs.existsSync(bin)) {
    console.log(`FAIL harness: MCP_CONFIRM_BIN is not set to a built binary (got ${JSON.stringify(bin)})`);
    process.exit(1);
  }
  return bin;
}

/** The installed version of an npm package, read from its package.json. */
export function installedVersion(pkg) {
  const dir = path.dirname(new URL(import.meta.url).pathname);
  return JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', pkg, 'package.json'), 'utf8')).version;
}

/**
 * A fresh root directory with the file to delete and a bystander that must
 * never be touched.
 */
export function makeRoot(label) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `mcp-confirm-${label}-`));
  const target = path.join(dir, 'target.txt');
  const keep = path.join(dir, 'keep.txt');
  const content = `delete me (${label})\n`;
  fs.writeFileSync(target, content);
  fs.writeFileSync(keep, 'bystander\n');
  return {
    dir,
    target,
    content,
    recreate() {
      fs.writeFileSync(target, content);
    },
    /** Throws unless the target is gone and the bystander intact. */
    wantDeleted() {
      if (fs.existsSync(target)) throw new Error(`${target} still exists after the approved deletion`);
      this.wantBystander();
    },
    /** Throws unless the target is still there, byte for byte, and the bystander intact. */
    wantUntouched() {
      if (!fs.existsSync(target)) throw new Error(`${target} was deleted but must not have been`);
      const got = fs.readFileSync(target, 'utf8');
      if (got !== content) throw new Error(`${target} was modified: ${JSON.stringify(got)}`);
      this.wantBystander();
    },
    wantBystander() {
      if (fs.readFileSync(keep, 'utf8') !== 'bystander\n') throw new Error(`bystander ${keep} was touched`);
      const names = fs.readdirSync(dir).sort().join(',');
      const want = fs.existsSync(target) ? 'keep.txt,target.txt' : 'keep.txt';
      if (names !== want) throw new Error(`root holds ${names}, want ${want}`);
    },
    cleanup() {
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A key file shared by two server processes (the replica case). */
export function makeKeyFile() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-confirm-key-'));
  const file = path.join(dir, 'keys');
  // The format `mcp-confirm keygen` writes (package keyfile); a fixed test key.
  fs.writeFileSync(file, '# test key, never used in production\nmcp-confirm-key-v1:aW50ZXJvcC10ZXN0LWtleS0wMTIzNDU2Nzg5YWJjZGVmPE1UXQ\n', { mode: 0o600 });
  return { file, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Starts `bin ...args --http 127.0.0.1:0 ...after` and resolves with its
 * URL, read from the address line it logs at start. after: arguments that
 * must come last (the proxy's `-- COMMAND ARGS`).
 *
 * The server requires the bearer token it generates at start (no auth
 * flag): its file is found where stderr says, in a private
 * XDG_RUNTIME_DIR of this server's own, and the token handed back as
 * `token`, `headers` (for the v1 SDK's requestInit) and `authProvider`
 * (the v2 client's). auth: false serves without authentication
 * (--insecure-no-auth, loopback only) for clients that cannot send a
 * token (the conformance suite).
 */
export function startHTTP(bin, args, after = [], { auth = true } = {}) {
  const runtimeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-confirm-run-')); // 0700
  const noAuth = auth ? [] : ['--insecure-no-auth'];
  const proc = spawn(bin, [...args, '--http', '127.0.0.1:0', ...noAuth, ...after], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, XDG_RUNTIME_DIR: runtimeDir },
  });
  const removeRuntimeDir = () => fs.rmSync(runtimeDir, { recursive: true, force: true });
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not log its address within 10 s; stderr:\n${log}`));
    }, 10_000);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      removeRuntimeDir();
      reject(new Error(`server exited (${code}) before serving; stderr:\n${log}`));
    });
    let served = false;
    proc.stderr.on('data', (chunk) => {
      log += chunk;
      const m = served ? null : /addr=(http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) {
        served = true;
        clearTimeout(timer);
        proc.removeAllListeners('exit');
        let token;
        if (auth) {
          const f = /written to\n\s+(\S+)/.exec(log);
          if (!f) {
            proc.kill('SIGKILL');
            reject(new Error(`server named no token file on stderr:\n${log}`));
            return;
          }
          try {
            token = fs.readFileSync(f[1], 'utf8').trim();
          } catch (err) {
            proc.kill('SIGKILL');
            reject(err);
            return;
          }
        }
        resolve({
          url: m[1],
          token,
          headers: token ? { Authorization: `Bearer ${token}` } : {},
          authProvider: { token: async () => token },
          log: () => log,
          stop: () => stopProcess(proc).then(removeRuntimeDir),
        });
      }
    });
  });
}

/** SIGTERM, then SIGKILL after 3 s. */
// keepStderr keeps what a stdio transport's server writes to stderr, as
// ctx.serverLog, for the failure message.
export function keepStderr(ctx, t) {
  let log = '';
  t.stderr?.on('data', (d) => { log += d; });
  ctx.serverLog = () => log;
}

// MRTR is the first protocol version with multi round-trip requests.
export const MRTR = '2026-07-28';

// connectEra connects a @modelcontextprotocol/client over t, closes it when
// the case ends, and checks that it negotiated era's protocol: MRTR itself,
// or (for 'legacy') an older one. It returns the negotiated version.
export async function connectEra(ctx, client, t, era) {
  ctx.defer(() => client.close());
  await client.connect(t);
  const v = client.getNegotiatedProtocolVersion();
  want(era === MRTR ? v === MRTR : v < MRTR, `negotiated protocol ${v}, want ${era === MRTR ? MRTR : 'an older era'}`);
  return v;
}

export function stopProcess(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => proc.kill('SIGKILL'), 3_000);
    proc.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    proc.kill('SIGTERM');
  });
}

/** Records the questions a client was asked and answers them. */
export function answerer(answer) {
  const asked = [];
  return {
    asked,
    handle(params) {
      asked.push(params);
      return answer;
    },
  };
}

export const ACCEPT = Object.freeze({ action: 'accept', content: { confirm: true } });
export const DECLINE = Object.freeze({ action: 'decline' });

/** The text of a tool result. */
export function text(res) {
  return (res?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
}

export function want(cond, msg) {
  if (!cond) throw new Error(msg);
}

/** Asserts the question was asked exactly once and names the file and its size. */
export function wantAskedOnce(ans, root) {
  want(ans.asked.length === 1, `asked ${ans.asked.length} times, want exactly 1`);
  const q = ans.asked[0];
  want(q.message.includes(path.basename(root.target)), `question does not name the file: ${JSON.stringify(q.message)}`);
  want(q.message.includes(`${Buffer.byteLength(root.content)} bytes`), `question does not show the size: ${JSON.stringify(q.message)}`);
  const schema = q.requestedSchema;
  want(schema?.properties?.confirm?.type === 'boolean' && schema.required?.includes('confirm'),
    `question does not ask for confirm: boolean: ${JSON.stringify(schema)}`);
}

/** Asserts a tool error result (not a protocol error) whose text includes want. */
export function wantToolError(res, needle) {
  want(res && res.isError === true, `want a tool error result, got ${JSON.stringify(res)}`);
  want(text(res).includes(needle), `tool error ${JSON.stringify(text(res))} does not say ${JSON.stringify(needle)}`);
}

/**
 * Asserts that res answers a retry of an approval already acted on: the
 * result of that one execution, first, given back marked as the earlier
 * execution's, with nothing run again.
 */
export function wantReplayed(res, first) {
  want(res && res.resultType !== 'input_required' && res.isError === first.isError,
    `want the earlier result given back, got ${JSON.stringify(res)}`);
  const t = text(res);
  want(t.includes('result of that earlier execution') && t.includes('Nothing was run again') && t.endsWith(text(first)),
    `retry answered ${JSON.stringify(t)}, want ${JSON.stringify(text(first))} marked as the earlier execution's`);
}

/** Asserts a successful, non-error result whose text includes want. */
export function wantResult(res, needle) {
  want(res && res.isError !== true && res.resultType !== 'input_required', `want a complete result, got ${JSON.stringify(res)}`);
  want(text(res).includes(needle), `result ${JSON.stringify(text(res))} does not say ${JSON.stringify(needle)}`);
}

/**
 * Runs call, whose elicitation handler throws (the dialog failed), and
 * asserts the outcome is prompt and clean: either a tool error saying nothing
 * was done, or a thrown error that is not a code-0 JSON-RPC error. Returns a
 * description of which.
 */
export async function wantCleanDialogFailure(call) {
  try {
    const res = await call();
    wantToolError(res, 'Nothing was done');
    return 'tool error';
  } catch (err) {
    want(err?.code !== 0, `a code-0 error: ${describeError(err)}`);
    return `error ${describeError(err)}`;
  }
}

/** Describes a thrown error, with its JSON-RPC code if it has one. */
export function describeError(err) {
  const code = err?.code !== undefined ? ` (code ${err.code})` : '';
  return `${err?.name ?? 'Error'}${code}: ${err?.message ?? String(err)}`;
}

/**
 * Runs a script's cases in order, one report line per case, and exits
 * non-zero if any failed. Each case gets caseTimeoutMs; the whole script
 * hardTimeoutMs, after which it reports and exits whatever is pending.
 */
export async function runCases(script, cases, { caseTimeoutMs = 30_000, hardTimeoutMs = 240_000 } = {}) {
  let failed = 0;
  let passed = 0;
  const hard = setTimeout(() => {
    console.log(`FAIL ${script}: hard timeout after ${hardTimeoutMs / 1000} s (a case hung)`);
    process.exit(1);
  }, hardTimeoutMs);
  // CASE_FILTER (a regular expression on case names) is for controls.mjs,
  // which runs chosen cases against a broken server; run.sh never sets it.
  const filter = process.env.CASE_FILTER ? new RegExp(process.env.CASE_FILTER) : null;
  const selected = filter ? cases.filter((c) => filter.test(c.name)) : cases;
  if (selected.length === 0) {
    console.log(`FAIL ${script}: no case matches CASE_FILTER ${filter}`);
    process.exit(1);
  }
  for (const c of selected) {
    const cleanups = [];
    const ctx = { defer: (fn) => cleanups.push(fn) };
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${caseTimeoutMs / 1000} s (hang)`)), caseTimeoutMs);
    });
    try {
      const detail = await Promise.race([c.run(ctx), timeout]);
      passed++;
      console.log(`PASS ${c.name}${detail ? `: ${detail}` : ''}`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${c.name}: ${describeError(err)}`);
      if (ctx.serverLog) console.log(ctx.serverLog().split('\n').map((l) => `    | ${l}`).join('\n'));
    } finally {
      clearTimeout(timer);
      for (const fn of cleanups.reverse()) {
        try {
          await Promise.race([fn(), new Promise((r) => setTimeout(r, 5_000))]);
        } catch {
          // Cleanup failures do not change the verdict; the timeout bounds them.
        }
      }
    }
  }
  clearTimeout(hard);
  console.log(`${script}: ${passed} passed, ${failed} failed`);
  process.exit(failed > 0 ? 1 : 0);
}
