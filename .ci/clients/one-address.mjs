// Both protocol eras from one --http address: one server process, three
// different clients at once — @modelcontextprotocol/client pinned to
// 2026-07-28, the same package in 'legacy' mode, and @modelcontextprotocol/sdk
// v1 — each confirming the deletion of its own file. Each file is deleted
// exactly once, each client asked exactly once, and the bystanders untouched.

import { Client as ClientV2, StreamableHTTPClientTransport as HTTPV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as HTTPV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import {
  ACCEPT, answerer, binary, installedVersion, makeRoot, runCases, startHTTP, want, wantAskedOnce, wantResult,
} from './lib.mjs';

const bin = binary();
const V2 = `@modelcontextprotocol/client@${installedVersion('@modelcontextprotocol/client')}`;
const V1 = `@modelcontextprotocol/sdk@${installedVersion('@modelcontextprotocol/sdk')}`;

const cases = [{
  name: `one --http address: ${V2} 2026-07-28 + ${V2} legacy + ${V1}, concurrently`,
  async run(ctx) {
    const roots = ['modern', 'legacy', 'v1'].map((l) => {
      const r = makeRoot(`one-${l}`);
      ctx.defer(() => r.cleanup());
      return r;
    });
    const srv = await startHTTP(bin, roots.flatMap((r) => ['--root', r.dir]));
    ctx.defer(srv.stop);
    ctx.serverLog = srv.log;
    const url = new URL(srv.url);

    const clients = [];
    for (const mode of [{ pin: '2026-07-28' }, 'legacy']) {
      const ans = answerer(ACCEPT);
      const c = new ClientV2({ name: 'mcp-confirm-interop', version: '1' }, {
        capabilities: { elicitation: { form: {} } },
        versionNegotiation: { mode },
      });
      c.setRequestHandler('elicitation/create', async (req) => ans.handle(req.params));
      ctx.defer(() => c.close());
      await c.connect(new HTTPV2(url, { authProvider: srv.authProvider }));
      clients.push({ c, ans, version: c.getNegotiatedProtocolVersion() });
    }
    const ans1 = answerer(ACCEPT);
    const c1 = new ClientV1({ name: 'mcp-confirm-interop', version: '1' }, { capabilities: { elicitation: {} } });
    c1.setRequestHandler(ElicitRequestSchema, async (req) => ans1.handle(req.params));
    ctx.defer(() => c1.close());
    const t1 = new HTTPV1(url, { requestInit: { headers: srv.headers } });
    await c1.connect(t1);
    clients.push({ c: c1, ans: ans1, version: t1.protocolVersion });

    want(clients[0].version === '2026-07-28', `first client negotiated ${clients[0].version}`);
    want(clients[1].version < '2026-07-28' && clients[2].version < '2026-07-28',
      `older-era clients negotiated ${clients[1].version} and ${clients[2].version}`);

    const results = await Promise.all(clients.map(({ c }, i) =>
      c.callTool({ name: 'delete_file', arguments: { path: roots[i].target } })));
    results.forEach((res, i) => {
      wantResult(res, 'Deleted');
      roots[i].wantDeleted();
      wantAskedOnce(clients[i].ans, roots[i]);
    });
    return `protocols ${clients.map((c) => c.version).join(', ')}; each file deleted once, each client asked once`;
  },
}];

await runCases('one-address', cases);
