// @modelcontextprotocol/client (TypeScript SDK v2) against the built binary
// as `mcp-confirm proxy` in front of the real
// @modelcontextprotocol/server-filesystem (both pinned in package-lock.json),
// with the README's five-line policy; both protocol eras (2026-07-28
// pinned, and 'legacy'), the proxy served over stdio and streamable HTTP,
// the upstream always over stdio.
//
// Cases: tools/list hides the denied create_directory; reads pass without a
// question; write_file, edit_file and move_file are asked once each (the
// proxy's own question) and act once; create_directory by name is refused;
// a declined write writes nothing; a replayed approval (manual retry)
// writes nothing and is answered with the earlier write's result. Every
// effect is checked on disk.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

import {
  ACCEPT, DECLINE, answerer, binary, installedVersion, runCases, startHTTP, text, want, wantReplayed, wantResult, wantToolError,
  keepStderr, connectEra, MRTR,
} from './lib.mjs';

const PKG = '@modelcontextprotocol/client';
const UPSTREAM = '@modelcontextprotocol/server-filesystem';
const NAME = `${PKG}@${installedVersion(PKG)} -> proxy -> ${UPSTREAM}@${installedVersion(UPSTREAM)}`;
const LEGACY = 'legacy';
const bin = binary();
const here = path.dirname(new URL(import.meta.url).pathname);
const upstreamEntry = path.join(here, 'node_modules', UPSTREAM, 'dist', 'index.js');

// The README's policy, read from the README itself (TestReadmePolicy checks
// the Go tests run the same one).
const readme = fs.readFileSync(path.join(here, '..', '..', 'README.md'), 'utf8');
// MCP_CONFIRM_PROXY_POLICY replaces it for controls.mjs only (a policy that
// gates nothing, which the cases must catch); run.sh never sets it.
const POLICY = process.env.MCP_CONFIRM_PROXY_POLICY ?? /<!-- proxy-policy[^\n]*\n```toml\n([\s\S]*?)```/.exec(readme)?.[1];
if (!POLICY) {
  console.log('FAIL harness: README.md has no proxy-policy toml block');
  process.exit(1);
}

/** A fresh directory for the filesystem server, with one file in it. */
function makeDir(ctx) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-confirm-proxy-')));
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello world\n');
  const policy = path.join(dir, '..', `${path.basename(dir)}.policy.toml`);
  fs.writeFileSync(policy, POLICY, { mode: 0o600 });
  ctx.defer(() => { fs.rmSync(dir, { recursive: true, force: true }); fs.rmSync(policy, { force: true }); });
  return { dir, policy, file: (name) => path.join(dir, name) };
}

function newClient(era, ans, { manual = false } = {}) {
  const opts = { versionNegotiation: { mode: era === MRTR ? { pin: MRTR } : 'legacy' }, capabilities: { elicitation: { form: {} } } };
  if (manual) opts.inputRequired = { autoFulfill: false };
  const client = new Client({ name: 'mcp-confirm-proxy-interop', version: '1' }, opts);
  client.setRequestHandler('elicitation/create', async (req) => ans.handle(req.params));
  return client;
}

async function connect(ctx, client, era, transport, d) {
  const proxyArgs = ['proxy', '--policy', d.policy];
  const upstream = ['--', process.execPath, upstreamEntry, d.dir];
  let t;
  if (transport === 'http') {
    const srv = await startHTTP(bin, proxyArgs, upstream);
    ctx.defer(srv.stop);
    ctx.serverLog = srv.log;
    t = new StreamableHTTPClientTransport(new URL(srv.url), { authProvider: srv.authProvider });
  } else {
    t = new StdioClientTransport({ command: bin, args: [...proxyArgs, ...upstream], stderr: 'pipe' });
    keepStderr(ctx, t);
  }
  return connectEra(ctx, client, t, era);
}

const read = (f) => fs.readFileSync(f, 'utf8');

/** Asserts the question is the proxy's own, for tool, naming each needle. */
function wantProxyQuestion(params, tool, ...needles) {
  const q = params.message.replace(/[\u2066-\u2069]/g, '');
  want(q.includes(`Run the tool «${tool}» of «filesystem»`), `not the proxy's question for ${tool}: ${JSON.stringify(params.message)}`);
  for (const n of needles) want(q.includes(n), `question for ${tool} does not show ${JSON.stringify(n)}: ${JSON.stringify(q)}`);
  const schema = params.requestedSchema;
  want(schema?.properties?.confirm?.type === 'boolean', `question does not ask for confirm: boolean: ${JSON.stringify(schema)}`);
}

const cases = [];
for (const era of [MRTR, LEGACY]) {
  for (const transport of ['stdio', 'http']) {
    const label = `${NAME} ${era} ${transport}`;
    cases.push({
      name: `${label} write-edit-move-once, reads allowed, create_directory invisible`,
      async run(ctx) {
        const d = makeDir(ctx);
        const ans = answerer(ACCEPT);
        const client = newClient(era, ans);
        const v = await connect(ctx, client, era, transport, d);

        const names = (await client.listTools()).tools.map((t) => t.name);
        for (const n of ['read_text_file', 'write_file', 'edit_file', 'move_file']) want(names.includes(n), `tools/list lacks ${n}: ${names}`);
        want(!names.includes('create_directory'), `tools/list shows the denied create_directory: ${names}`);

        wantResult(await client.callTool({ name: 'read_text_file', arguments: { path: d.file('notes.txt') } }), 'hello world');
        want(ans.asked.length === 0, `a read was asked: ${JSON.stringify(ans.asked)}`);

        const f = d.file('new.txt');
        wantResult(await client.callTool({ name: 'write_file', arguments: { path: f, content: 'first line\n' } }), 'Successfully wrote');
        want(read(f) === 'first line\n', `new.txt = ${JSON.stringify(read(f))}`);
        wantResult(await client.callTool({ name: 'edit_file', arguments: { path: f, edits: [{ oldText: 'first', newText: 'edited' }] } }), 'edited');
        want(read(f) === 'edited line\n', `after edit_file new.txt = ${JSON.stringify(read(f))}`);
        const g = d.file('moved.txt');
        wantResult(await client.callTool({ name: 'move_file', arguments: { source: f, destination: g } }), 'Successfully moved');
        want(!fs.existsSync(f) && read(g) === 'edited line\n', 'move_file did not move new.txt to moved.txt');

        want(ans.asked.length === 3, `asked ${ans.asked.length} times, want 3 (write, edit, move)`);
        wantProxyQuestion(ans.asked[0], 'write_file', '- «content»: string «first line\\n»', 'new.txt');
        wantProxyQuestion(ans.asked[1], 'edit_file', 'oldText', 'newText');
        wantProxyQuestion(ans.asked[2], 'move_file', 'moved.txt');

        wantToolError(await client.callTool({ name: 'create_directory', arguments: { path: d.file('sub') } }), 'not available');
        want(!fs.existsSync(d.file('sub')), 'create_directory acted');
        want(fs.readdirSync(d.dir).sort().join(',') === 'moved.txt,notes.txt', `directory holds ${fs.readdirSync(d.dir)}`);
        return `protocol ${v}; 3 questions, each acted once; read not asked; create_directory hidden and refused`;
      },
    });
    cases.push({
      name: `${label} decline`,
      async run(ctx) {
        const d = makeDir(ctx);
        const ans = answerer(DECLINE);
        const client = newClient(era, ans);
        await connect(ctx, client, era, transport, d);
        wantResult(await client.callTool({ name: 'write_file', arguments: { path: d.file('no.txt'), content: 'x' } }), 'Not confirmed');
        want(!fs.existsSync(d.file('no.txt')), 'a declined write_file wrote');
        want(ans.asked.length === 1, `asked ${ans.asked.length} times, want 1`);
        return 'asked once; nothing written';
      },
    });
  }
}

// On 2026-07-28 the client holds the requestState: replaying a spent
// approval must not write again; it is answered with the earlier write's
// result, marked as the earlier execution's.
for (const transport of ['stdio', 'http']) {
  cases.push({
    name: `${NAME} ${MRTR} ${transport} replay`,
    async run(ctx) {
      const d = makeDir(ctx);
      const ans = answerer(ACCEPT);
      const client = newClient(MRTR, ans, { manual: true });
      await connect(ctx, client, MRTR, transport, d);
      const f = d.file('a.txt');
      const args = { path: f, content: 'approved\n' };
      const r1 = await client.callTool({ name: 'write_file', arguments: args }, { allowInputRequired: true });
      want(r1.resultType === 'input_required' && r1.inputRequests?.confirm?.method === 'elicitation/create', `first round: ${JSON.stringify(r1)}`);
      wantProxyQuestion(r1.inputRequests.confirm.params, 'write_file', 'a.txt', 'approved\\n');
      want(!fs.existsSync(f), 'the first round wrote');
      const again = () => client.callTool({ name: 'write_file', arguments: args, inputResponses: { confirm: ACCEPT }, requestState: r1.requestState }, { allowInputRequired: true });
      const r2 = await again();
      wantResult(r2, 'Successfully wrote');
      fs.writeFileSync(f, 'changed since\n');
      const r3 = await again();
      wantReplayed(r3, r2);
      want(read(f) === 'changed since\n', `the replay wrote again: ${JSON.stringify(read(f))}`);
      return `written once; replay answered with the earlier result: ${JSON.stringify(text(r3)).slice(0, 60)}…`;
    },
  });
}

await runCases('proxy-filesystem.mjs', cases, { caseTimeoutMs: 60_000, hardTimeoutMs: 400_000 });
