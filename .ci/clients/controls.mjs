// Negative controls for the client scripts: run their cases against
// controls/{liar,sneaky}-server.mjs, stand-ins that answer exactly like mcp-confirm
// but lie about the filesystem, and require each case to FAIL on the
// filesystem check. A script whose checks only read the server's words would
// pass these cases; so would a harness that never ran them. The proxy's
// script runs against the real binary with a policy that gates nothing, or
// hides nothing: its cases must fail on what it checks (a question asked, a
// denied tool hidden), not pass because the server said so.

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

const controls = [];
for (const script of ['ts-sdk-v1.mjs', 'ts-client-v2.mjs', 'mcpdo.mjs']) {
  const legacyStdio = script === 'ts-sdk-v1.mjs' ? '2025-11-25 stdio' : 'legacy stdio';
  controls.push(
    { script, mode: 'liar', cases: [`${legacyStdio} accept`], want: 'still exists after the approved deletion' },
    { script, mode: 'sneaky', cases: [`${legacyStdio} decline`, `${legacyStdio} no-elicitation`], want: 'was deleted but must not have been' },
  );
}

const MRTR_STDIO = '2026-07-28 stdio write-edit-move-once, reads allowed, create_directory invisible';
const LEGACY_STDIO = 'legacy stdio write-edit-move-once, reads allowed, create_directory invisible';
controls.push(
  {
    script: 'proxy-filesystem.mjs', mode: 'proxy allowing everything', cases: [MRTR_STDIO, LEGACY_STDIO],
    env: { MCP_CONFIRM_PROXY_POLICY: 'allow = ["*"]\n' }, want: 'tools/list shows the denied create_directory',
  },
  {
    script: 'proxy-filesystem.mjs', mode: 'proxy allowing the writes', cases: [MRTR_STDIO, LEGACY_STDIO],
    env: { MCP_CONFIRM_PROXY_POLICY: 'allow = ["read_*", "list_*", "write_file", "edit_file", "move_file"]\ndeny = ["create_directory"]\n' },
    want: 'asked 0 times, want 3',
  },
);

let passed = 0;
let failed = 0;
for (const c of controls) {
  const filter = `(${c.cases.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})$`;
  const r = spawnSync(process.execPath, [path.join(here, c.script)], {
    cwd: here,
    encoding: 'utf8',
    timeout: 60_000,
    env: c.env
      ? { ...process.env, ...c.env, CASE_FILTER: filter }
      : { ...process.env, MCP_CONFIRM_BIN: path.join(here, 'controls', `${c.mode}-server.mjs`), CASE_FILTER: filter },
  });
  const lines = (r.stdout ?? '').split('\n');
  for (const name of c.cases) {
    const label = `control ${c.script} vs ${c.mode} server: ${name}`;
    const line = lines.find((l) => l.includes(` ${name}:`) || l.endsWith(` ${name}`));
    if (r.status !== 0 && line?.startsWith('FAIL ') && line.includes(c.want)) {
      passed++;
      console.log(`PASS ${label} fails as it must ("${c.want}")`);
    } else {
      failed++;
      console.log(`FAIL ${label}: want a FAIL line saying "${c.want}", got exit ${r.status} and ${JSON.stringify(line ?? r.stdout + r.stderr)}`);
    }
  }
}
console.log(`controls: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
