// @modelcontextprotocol/client (TypeScript SDK v2) against the built
// mcp-confirm binary: both protocol eras (2026-07-28 pinned, and 'legacy'),
// over stdio and streamable HTTP.
//
// Cases: accept (deleted once, asked once), decline (nothing deleted),
// a client without elicitation or with URL-only elicitation (a clear tool
// error, nothing deleted), a dialog that fails (a prompt error, not code 0,
// nothing deleted), and a
// replay of a spent approval (manual retry: the input_required result's
// requestState is captured and sent again after the deletion, with the file
// re-created; it must be answered with the earlier deletion's result, marked
// as the earlier execution's, and the re-created file left alone).

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

import {
  ACCEPT, DECLINE, answerer, binary, describeError, installedVersion, makeKeyFile, makeRoot, runCases, startHTTP,
  want, wantAskedOnce, wantCleanDialogFailure, wantReplayed, wantResult, wantToolError,
  keepStderr, connectEra, MRTR,
} from './lib.mjs';

const PKG = '@modelcontextprotocol/client';
const NAME = `${PKG}@${installedVersion(PKG)}`;
const LEGACY = 'legacy';
const bin = binary();

/**
 * A v2 client for era. ans: the elicitation answerer, or null for a client
 * that declares no elicitation capability. manual: disable the built-in
 * input_required retry loop, so the test drives the retry itself.
 */
function newClient(era, ans, { manual = false, mode, elicitation = { form: {} } } = {}) {
  const opts = { versionNegotiation: { mode: mode ?? (era === MRTR ? { pin: MRTR } : 'legacy') } };
  if (ans) opts.capabilities = { elicitation };
  if (manual) opts.inputRequired = { autoFulfill: false };
  const client = new Client({ name: 'mcp-confirm-interop', version: '1' }, opts);
  if (ans) client.setRequestHandler('elicitation/create', async (req) => ans.handle(req.params));
  return client;
}

/**
 * Connects client to a server for root over transport, registering the
 * cleanups on ctx. server: an already running HTTP server to reuse.
 */
async function connect(ctx, client, era, transport, root, { server, args = [] } = {}) {
  let t;
  if (transport === 'http') {
    const srv = server ?? (await startHTTP(bin, ['--root', root.dir, ...args]));
    if (!server) {
      ctx.defer(srv.stop);
      ctx.serverLog = srv.log;
    }
    t = new StreamableHTTPClientTransport(new URL(srv.url), { authProvider: srv.authProvider });
  } else {
    t = new StdioClientTransport({ command: bin, args: ['--root', root.dir, ...args], stderr: 'pipe' });
    keepStderr(ctx, t);
  }
  return connectEra(ctx, client, t, era);
}

const call = (client, root, extra = {}, options) =>
  client.callTool({ name: 'delete_file', arguments: { path: root.target }, ...extra }, options);

/** The first round by hand: the input_required result, with nothing deleted. */
async function firstRound(client, root) {
  const r1 = await call(client, root, {}, { allowInputRequired: true });
  want(r1.resultType === 'input_required', `first round: want input_required, got ${JSON.stringify(r1)}`);
  want(r1.inputRequests?.confirm?.method === 'elicitation/create', `first round: no elicitation under "confirm": ${JSON.stringify(r1.inputRequests)}`);
  want(typeof r1.requestState === 'string' && r1.requestState.length > 0, 'first round: no requestState');
  root.wantUntouched();
  return r1.requestState;
}

const retry = (client, root, state, answer) =>
  call(client, root, { inputResponses: { confirm: answer }, requestState: state }, { allowInputRequired: true });

function withRoot(ctx, label) {
  const root = makeRoot(label);
  ctx.defer(() => root.cleanup());
  return root;
}

const cases = [];
for (const era of [MRTR, LEGACY]) {
  for (const transport of ['stdio', 'http']) {
    const label = `${NAME} ${era} ${transport}`;
    cases.push({
      name: `${label} accept`,
      async run(ctx) {
        const root = withRoot(ctx, 'accept');
        const ans = answerer(ACCEPT);
        const client = newClient(era, ans);
        const v = await connect(ctx, client, era, transport, root);
        wantResult(await call(client, root), 'Deleted');
        root.wantDeleted();
        wantAskedOnce(ans, root);
        return `protocol ${v}; asked once; deleted`;
      },
    });
    cases.push({
      name: `${label} decline`,
      async run(ctx) {
        const root = withRoot(ctx, 'decline');
        const ans = answerer(DECLINE);
        const client = newClient(era, ans);
        await connect(ctx, client, era, transport, root);
        wantResult(await call(client, root), 'Not confirmed: nothing was done.');
        root.wantUntouched();
        wantAskedOnce(ans, root);
        return 'asked once; nothing deleted';
      },
    });
    cases.push({
      name: `${label} no-elicitation`,
      async run(ctx) {
        const root = withRoot(ctx, 'noelicit');
        const client = newClient(era, null);
        await connect(ctx, client, era, transport, root);
        wantToolError(await call(client, root), 'cannot show a confirmation dialog');
        root.wantUntouched();
        return 'tool error; nothing deleted';
      },
    });
    cases.push({
      name: `${label} url-only-elicitation`,
      async run(ctx) {
        // Declares elicitation, but only URL mode: it cannot show the form.
        const root = withRoot(ctx, 'urlonly');
        const ans = answerer(ACCEPT);
        const client = newClient(era, ans, { elicitation: { url: {} } });
        await connect(ctx, client, era, transport, root);
        wantToolError(await call(client, root), 'cannot show a confirmation dialog');
        root.wantUntouched();
        want(ans.asked.length === 0, `asked ${ans.asked.length} times, want 0`);
        return 'tool error; nothing deleted';
      },
    });
    cases.push({
      name: `${label} dialog-fails`,
      async run(ctx) {
        // Declares form elicitation, but its dialog fails (handler throws).
        const root = withRoot(ctx, 'dialogfails');
        const ans = answerer(ACCEPT);
        const client = newClient(era, { handle: (p) => { ans.handle(p); throw new Error('the dialog window was closed'); } });
        await connect(ctx, client, era, transport, root);
        const how = await wantCleanDialogFailure(() => call(client, root));
        root.wantUntouched();
        want(ans.asked.length === 1, `asked ${ans.asked.length} times, want 1`);
        return `${how}; nothing deleted`;
      },
    });
  }
}

// versionNegotiation 'auto' (probe with server/discover, fall back to
// initialize) must settle on 2026-07-28 with this server, on both transports.
for (const transport of ['stdio', 'http']) {
  cases.push({
    name: `${NAME} auto->${MRTR} ${transport} accept`,
    async run(ctx) {
      const root = withRoot(ctx, 'auto');
      const ans = answerer(ACCEPT);
      const client = newClient(MRTR, ans, { mode: 'auto' });
      const v = await connect(ctx, client, MRTR, transport, root);
      wantResult(await call(client, root), 'Deleted');
      root.wantDeleted();
      wantAskedOnce(ans, root);
      return `protocol ${v}; asked once; deleted`;
    },
  });
}

// Replays. On 2026-07-28 the client holds the requestState, so the replay is
// the same connection sending the spent state again.
for (const transport of ['stdio', 'http']) {
  cases.push({
    name: `${NAME} ${MRTR} ${transport} replay`,
    async run(ctx) {
      const root = withRoot(ctx, 'replay');
      const ans = answerer(ACCEPT);
      const client = newClient(MRTR, ans, { manual: true });
      await connect(ctx, client, MRTR, transport, root);
      const state = await firstRound(client, root);
      const first = await retry(client, root, state, ACCEPT);
      wantResult(first, 'Deleted');
      root.wantDeleted();
      root.recreate();
      wantReplayed(await retry(client, root, state, ACCEPT), first);
      root.wantUntouched();
      want(ans.asked.length === 0, 'the built-in retry loop ran although it was disabled');
      return 'deleted once; replay answered with the earlier result; re-created file untouched';
    },
  });
}

// HTTP requires the bearer token the server generated: without it the
// client gets 401 and RFC 9728's challenge, which names the metadata that
// says where tokens come from; nothing is deleted.
cases.push({
  name: `${NAME} http without the token: 401 with the resource-metadata challenge`,
  async run(ctx) {
    const root = withRoot(ctx, 'no-token');
    const srv = await startHTTP(bin, ['--root', root.dir]);
    ctx.defer(srv.stop);
    ctx.serverLog = srv.log;
    const seen = [];
    const client = newClient(MRTR, answerer(ACCEPT));
    ctx.defer(() => client.close());
    const t = new StreamableHTTPClientTransport(new URL(srv.url), {
      authProvider: { token: async () => undefined, onUnauthorized: async ({ response }) => { seen.push(response); } },
    });
    let err;
    try {
      await client.connect(t);
    } catch (e) {
      err = e;
    }
    want(err, 'connected without a token');
    want(seen.length >= 1, `the client saw no 401 (it failed with ${describeError(err)})`);
    want(seen[0].status === 401, `status ${seen[0].status}, want 401`);
    const challenge = seen[0].headers.get('www-authenticate') ?? '';
    const m = /^Bearer resource_metadata="([^"]+)"$/.exec(challenge);
    want(m, `WWW-Authenticate ${JSON.stringify(challenge)}: want Bearer resource_metadata="..."`);
    const meta = await (await fetch(m[1])).json();
    want(meta.resource === srv.url, `the metadata names resource ${meta.resource}, want ${srv.url}`);
    const res = await fetch(srv.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MRTR },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delete_file', arguments: { path: root.target } } }),
    });
    want(res.status === 401, `a tools/call without the token got ${res.status}, want 401`);
    root.wantUntouched();
    return `401 with ${challenge}; metadata of ${meta.resource}; nothing deleted`;
  },
});

// On the older era the server elicits in-process and the requestState never
// reaches the client. Over HTTP both eras share one address and one ledger,
// so a state spent on a 2026-07-28 connection is replayed on a legacy one.
cases.push({
  name: `${NAME} ${LEGACY} http replay (state spent on 2026-07-28, same address)`,
  async run(ctx) {
    const root = withRoot(ctx, 'replay-legacy');
    const srv = await startHTTP(bin, ['--root', root.dir]);
    ctx.defer(srv.stop);
    ctx.serverLog = srv.log;
    const modern = newClient(MRTR, answerer(ACCEPT), { manual: true });
    await connect(ctx, modern, MRTR, 'http', root, { server: srv });
    const state = await firstRound(modern, root);
    const first = await retry(modern, root, state, ACCEPT);
    wantResult(first, 'Deleted');
    root.wantDeleted();
    root.recreate();
    const ans = answerer(ACCEPT);
    const legacy = newClient(LEGACY, ans);
    await connect(ctx, legacy, LEGACY, 'http', root, { server: srv });
    const res = await replay(legacy, root, state);
    wantReplayed(res, first);
    root.wantUntouched();
    want(ans.asked.length === 0, `the legacy client was asked ${ans.asked.length} times, want 0`);
    return 'replay answered with the earlier result; re-created file untouched';
  },
});

// Over stdio one process serves one connection, so a legacy stdio client can
// only present a state from another process: with a shared --key-file the
// boundary accepts it and that process's ledger has no record of it.
cases.push({
  name: `${NAME} ${LEGACY} stdio replay (state spent in another process with the same --key-file)`,
  async run(ctx) {
    const root = withRoot(ctx, 'replay-replica');
    const key = makeKeyFile();
    ctx.defer(() => key.cleanup());
    const args = ['--key-file', key.file];
    const modern = newClient(MRTR, answerer(ACCEPT), { manual: true });
    await connect(ctx, modern, MRTR, 'stdio', root, { args });
    const state = await firstRound(modern, root);
    wantResult(await retry(modern, root, state, ACCEPT), 'Deleted');
    root.wantDeleted();
    root.recreate();
    const ans = answerer(ACCEPT);
    const legacy = newClient(LEGACY, ans);
    await connect(ctx, legacy, LEGACY, 'stdio', root, { args });
    const res = await replay(legacy, root, state);
    wantToolError(res, 'no record of this confirmation');
    root.wantUntouched();
    want(ans.asked.length === 0, `the legacy client was asked ${ans.asked.length} times, want 0`);
    return 'replay refused (no record in this process); re-created file untouched';
  },
});

await runCases(NAME, cases);

// replay presents a captured requestState, with an approval, on a client's
// own connection: what a client replaying a spent approval sends.
function replay(client, root, state) {
  return client.request({
    method: 'tools/call',
    params: { name: 'delete_file', arguments: { path: root.target }, inputResponses: { confirm: ACCEPT }, requestState: state },
  });
}
