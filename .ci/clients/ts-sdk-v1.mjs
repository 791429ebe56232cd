// @modelcontextprotocol/sdk (TypeScript SDK v1, protocol up to 2025-11-25)
// against the built mcp-confirm binary, over stdio and streamable HTTP. It
// knows only the older era: the server elicits in-process and the client
// answers its elicitation/create request.
//
// Cases: accept (deleted once, asked once), decline (nothing deleted), a
// client without elicitation (a clear tool error, nothing deleted), and a
// dialog that fails (a prompt error, not code 0, nothing deleted).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

import {
  ACCEPT, DECLINE, answerer, binary, installedVersion, makeRoot, runCases, startHTTP,
  want, wantAskedOnce, wantCleanDialogFailure, wantResult, wantToolError,
  keepStderr,
} from './lib.mjs';

const PKG = '@modelcontextprotocol/sdk';
const NAME = `${PKG}@${installedVersion(PKG)}`;
const bin = binary();

function newClient(ans) {
  const client = new Client({ name: 'mcp-confirm-interop', version: '1' }, ans ? { capabilities: { elicitation: {} } } : {});
  if (ans) client.setRequestHandler(ElicitRequestSchema, async (req) => ans.handle(req.params));
  return client;
}

async function connect(ctx, client, transport, root) {
  let t;
  if (transport === 'http') {
    const srv = await startHTTP(bin, ['--root', root.dir]);
    ctx.defer(srv.stop);
    ctx.serverLog = srv.log;
    t = new StreamableHTTPClientTransport(new URL(srv.url), { requestInit: { headers: srv.headers } });
  } else {
    t = new StdioClientTransport({ command: bin, args: ['--root', root.dir], stderr: 'pipe' });
    keepStderr(ctx, t);
  }
  ctx.defer(() => client.close());
  await client.connect(t);
  if (transport === 'http') {
    // The HTTP transport records the negotiated version for its headers.
    want(t.protocolVersion === LATEST_PROTOCOL_VERSION, `negotiated ${t.protocolVersion}, want ${LATEST_PROTOCOL_VERSION}`);
  }
}

const call = (client, root) => client.callTool({ name: 'delete_file', arguments: { path: root.target } });

function withRoot(ctx, label) {
  const root = makeRoot(label);
  ctx.defer(() => root.cleanup());
  return root;
}

const cases = [];
for (const transport of ['stdio', 'http']) {
  const label = `${NAME} ${LATEST_PROTOCOL_VERSION} ${transport}`;
  cases.push({
    name: `${label} accept`,
    async run(ctx) {
      const root = withRoot(ctx, 'v1-accept');
      const ans = answerer(ACCEPT);
      const client = newClient(ans);
      await connect(ctx, client, transport, root);
      wantResult(await call(client, root), 'Deleted');
      root.wantDeleted();
      wantAskedOnce(ans, root);
      return 'asked once; deleted';
    },
  });
  cases.push({
    name: `${label} decline`,
    async run(ctx) {
      const root = withRoot(ctx, 'v1-decline');
      const ans = answerer(DECLINE);
      const client = newClient(ans);
      await connect(ctx, client, transport, root);
      wantResult(await call(client, root), 'Not confirmed: nothing was done.');
      root.wantUntouched();
      wantAskedOnce(ans, root);
      return 'asked once; nothing deleted';
    },
  });
  cases.push({
    name: `${label} no-elicitation`,
    async run(ctx) {
      const root = withRoot(ctx, 'v1-noelicit');
      const client = newClient(null);
      await connect(ctx, client, transport, root);
      wantToolError(await call(client, root), 'cannot show a confirmation dialog');
      root.wantUntouched();
      return 'tool error; nothing deleted';
    },
  });
  cases.push({
    name: `${label} dialog-fails`,
    async run(ctx) {
      const root = withRoot(ctx, 'v1-dialogfails');
      const ans = answerer(ACCEPT);
      const client = newClient({ handle: (p) => { ans.handle(p); throw new Error('the dialog window was closed'); } });
      await connect(ctx, client, transport, root);
      const how = await wantCleanDialogFailure(() => call(client, root));
      root.wantUntouched();
      want(ans.asked.length === 1, `asked ${ans.asked.length} times, want 1`);
      return `${how}; nothing deleted`;
    },
  });
}

await runCases(NAME, cases);
