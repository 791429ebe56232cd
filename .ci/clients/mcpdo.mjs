// MCP Inspector's connection CLI, mcpdo (@modelcontextprotocol/inspector),
// against the built mcp-confirm binary: both protocol eras (--era modern is
// 2026-07-28, --era legacy 2025-11-25), over stdio and over streamable HTTP
// (the generated token given with --header). mcpdo is a command per step:
// tools/call parks the server's question and prints it as
// elicitationPending; elicitation/respond answers it and prints the tool's
// result.
//
// Cases: accept (the question names the file, which is still there until
// the answer; then deleted), decline ("Not confirmed", nothing deleted), no
// elicitation (connected with --elicit off: the tool error, mcpdo's exit
// status 5, nothing deleted). Every case checks the filesystem.
//
// mcpdo talks to a daemon: this script starts one of its own (mcpdo
// private), with HOME and TMPDIR in a temporary directory and secrets kept
// in memory, and stops it and removes that directory on exit.

import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { binary, installedVersion, makeRoot, runCases, startHTTP, text, want } from './lib.mjs';

const PKG = '@modelcontextprotocol/inspector';
const NAME = `mcpdo ${PKG}@${installedVersion(PKG)}`;
const bin = binary();
const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = path.join(here, 'node_modules', PKG);
const mcpdoJS = path.join(pkgDir, JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).bin.mcpdo);

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-confirm-mcpdo-'));
const env = {
  ...process.env,
  HOME: home,
  TMPDIR: home,
  MCP_INSPECTOR_SECRET_STORE: 'memory',
  NO_COLOR: '1',
  NPM_CONFIG_UPDATE_NOTIFIER: 'false',
};
const exported = execFileSync(process.execPath, [mcpdoJS, 'private'], { env, encoding: 'utf8', timeout: 30_000 });
for (const m of exported.matchAll(/^export (MCP_INSPECTOR_\w+)='([^']*)'$/gm)) env[m[1]] = m[2];
if (!env.MCP_INSPECTOR_DAEMON_DIR?.startsWith(home) || !env.MCP_INSPECTOR_DAEMON_TOKEN) {
  console.log(`FAIL harness: mcpdo private did not give a daemon of this script's own under ${home}:\n${exported}`);
  process.exit(1);
}
process.on('exit', () => {
  try {
    execFileSync(process.execPath, [mcpdoJS, 'daemon', 'stop'], { env, timeout: 10_000, stdio: 'ignore' });
  } catch {
    // The directory goes anyway; a daemon left behind has lost its socket.
  }
  fs.rmSync(home, { recursive: true, force: true });
});

/**
 * The first JSON value of out, or null: a tool error prints the result and
 * then an error object.
 */
function firstJSON(out) {
  for (let i = out.indexOf('}'); i >= 0; i = out.indexOf('}', i + 1)) {
    try {
      return JSON.parse(out.slice(0, i + 1));
    } catch {
      // Not yet a whole value.
    }
  }
  return null;
}

/** Runs mcpdo with JSON output; resolves with its exit status and output. */
function mcpdo(args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [mcpdoJS, '--format', 'json', ...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      const json = firstJSON(stdout);
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, json, out: `${stdout}${stderr}` });
    });
  });
}

/**
 * Connects mcpdo to the binary serving root (a server of the case's own
 * over HTTP), in era, advertising elicitation as elicit; returns the
 * connection's name, disconnected when the case ends.
 */
async function connect(ctx, era, transport, root, elicit) {
  let args;
  if (transport === 'http') {
    const srv = await startHTTP(bin, ['--root', root.dir]);
    ctx.defer(srv.stop);
    ctx.serverLog = srv.log;
    // --header takes every word after it: it comes last.
    args = ['connect', `${srv.url}/`, '--era', era, '--elicit', elicit, '--transport', 'http', '--header', `Authorization: Bearer ${srv.token}`];
  } else {
    args = ['connect', '--era', era, '--elicit', elicit, '--transport', 'stdio', '--', bin, '--root', root.dir];
  }
  const r = await mcpdo(args);
  want(r.code === 0 && r.json?.name, `mcpdo connect: exit ${r.code}: ${r.out}`);
  want(r.json.protocolEra === era, `mcpdo connected in era ${r.json.protocolEra}, want ${era}`);
  ctx.defer(() => mcpdo(['disconnect', r.json.name]));
  return r.json.name;
}

/** Calls delete_file on root's target and returns the question mcpdo parked. */
async function ask(conn, root) {
  const r = await mcpdo(['--conn', conn, 'tools/call', 'delete_file', JSON.stringify({ path: root.target })]);
  const q = r.json?.elicitationPending;
  want(r.code === 0 && q, `tools/call: want elicitationPending, got exit ${r.code}: ${r.out}`);
  want(q.mode === 'form' && q.message.startsWith('Delete the file ') && q.message.includes(path.basename(root.target)),
    `the question does not name the file: ${JSON.stringify(q.message)}`);
  root.wantUntouched(); // nothing happens before the answer
  return q;
}

function withRoot(ctx, label) {
  const root = makeRoot(label);
  ctx.defer(() => root.cleanup());
  return root;
}

const cases = [];
for (const era of ['modern', 'legacy']) {
  for (const transport of ['stdio', 'http']) {
    const label = `${NAME} ${era} ${transport}`;
    cases.push({
      name: `${label} accept`,
      async run(ctx) {
        const root = withRoot(ctx, 'mcpdo-accept');
        const conn = await connect(ctx, era, transport, root, 'both');
        const q = await ask(conn, root);
        const r = await mcpdo(['--conn', conn, 'elicitation/respond', q.elicitationId, 'confirm:=true']);
        want(r.code === 0 && text(r.json).startsWith('Deleted '), `elicitation/respond: exit ${r.code}: ${r.out}`);
        root.wantDeleted();
        return 'asked, answered yes; deleted';
      },
    });
    cases.push({
      name: `${label} decline`,
      async run(ctx) {
        const root = withRoot(ctx, 'mcpdo-decline');
        const conn = await connect(ctx, era, transport, root, 'both');
        const q = await ask(conn, root);
        const r = await mcpdo(['--conn', conn, 'elicitation/respond', q.elicitationId, '--decline']);
        want(r.code === 0 && text(r.json) === 'Not confirmed: nothing was done.', `elicitation/respond --decline: exit ${r.code}: ${r.out}`);
        root.wantUntouched();
        return 'asked, declined; nothing deleted';
      },
    });
    cases.push({
      name: `${label} no-elicitation`,
      async run(ctx) {
        const root = withRoot(ctx, 'mcpdo-noelicit');
        const conn = await connect(ctx, era, transport, root, 'off');
        const r = await mcpdo(['--conn', conn, 'tools/call', 'delete_file', JSON.stringify({ path: root.target })]);
        want(r.code === 5 && r.json?.isError === true && text(r.json).includes('cannot show a confirmation dialog'),
          `tools/call with --elicit off: want the tool error (exit 5), got exit ${r.code}: ${r.out}`);
        root.wantUntouched();
        return 'tool error; nothing deleted';
      },
    });
  }
}

await runCases(NAME, cases, { caseTimeoutMs: 60_000, hardTimeoutMs: 280_000 });
