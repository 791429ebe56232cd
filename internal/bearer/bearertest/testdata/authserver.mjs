// A real OAuth 2 authorization server for the tests: oauth2-mock-server,
// at the version pinned in .ci/clients/package.json, imported from the
// node_modules that MCP_CONFIRM_NODE_MODULES names.
//
// It listens on 127.0.0.1 (a free port), with one RS256 key, and prints
// one JSON line: {"issuer": ...}. Its token endpoint honours RFC 8707's
// "resource" parameter as the token's audience, and names the client of a
// client_credentials grant in "sub", as identity providers do for service
// accounts (configured so, as a real one would be).
// Each line read on stdin is a command, answered with one JSON line:
//   rotate ALG   add a key of algorithm ALG      -> {"kid": ...}
//   stop         stop the server and exit
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const modules = process.env.MCP_CONFIRM_NODE_MODULES;
if (!modules) {
  console.error('set MCP_CONFIRM_NODE_MODULES');
  process.exit(2);
}
const { OAuth2Server, Events } = await import(
  pathToFileURL(path.join(modules, 'oauth2-mock-server', 'dist', 'index.mjs')).href
);

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');
server.service.on(Events.BeforeTokenSigning, (token, req) => {
  const { resource, grant_type: grant, client_id: client } = req.body ?? {};
  if (typeof resource === 'string') token.payload.aud = resource;
  if (grant === 'client_credentials' && typeof client === 'string') token.payload.sub = client;
});
await server.start(0, '127.0.0.1');
console.log(JSON.stringify({ issuer: server.issuer.url }));

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  const [cmd, arg] = line.trim().split(/\s+/);
  if (cmd === 'rotate') {
    const key = await server.issuer.keys.generate(arg || 'ES256');
    console.log(JSON.stringify({ kid: key.kid }));
  } else if (cmd === 'stop') {
    await server.stop();
    process.exit(0);
  } else {
    console.log(JSON.stringify({ error: `unknown command ${cmd}` }));
  }
});
rl.on('close', async () => {
  await server.stop().catch(() => {});
  process.exit(0);
});
