// A real OpenID Connect provider for the approval page's tests:
// oidc-provider, at the version pinned in .ci/clients/package.json,
// imported from the node_modules that MCP_CONFIRM_NODE_MODULES names.
//
// Configured by one JSON object in MCP_CONFIRM_ISSUER_CONFIG:
//   {"client_id", "client_secret", "redirect_uri",
//    "accounts": {"alice": ["ops"], ...}}   (each account's groups)
// It listens on 127.0.0.1 (a free port) as the issuer http://localhost:PORT
// (another site than 127.0.0.1, where the tests serve the page), and prints
// one JSON line: {"issuer": ...}. It stops when its stdin ends.
//
// It is oidc-provider's own authorization code flow: PKCE (S256) required
// of every client, ID tokens signed with its RS256 key, the "groups" scope
// putting a "groups" claim in the ID token. Only the interaction is the
// test's: the login page asks for an account name and no password (who
// the person is is the test's to say), and consent is granted at once.
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.env.MCP_CONFIRM_NODE_MODULES;
const config = JSON.parse(process.env.MCP_CONFIRM_ISSUER_CONFIG || 'null');
if (!modules || !config) {
  console.error('set MCP_CONFIRM_NODE_MODULES and MCP_CONFIRM_ISSUER_CONFIG');
  process.exit(2);
}
const { default: Provider } = await import(
  pathToFileURL(path.join(modules, 'oidc-provider', 'lib', 'index.js')).href
);

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://localhost:${server.address().port}`;

const accounts = config.accounts || {};
const provider = new Provider(issuer, {
  clients: [{
    client_id: config.client_id,
    client_secret: config.client_secret,
    redirect_uris: [config.redirect_uri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  claims: { openid: ['sub'], groups: ['groups'] },
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: false } },
  cookies: { keys: ['mcp-confirm-test-issuer-cookie-key'] },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(ctx, sub) {
    if (!Object.hasOwn(accounts, sub)) return undefined;
    return { accountId: sub, async claims() { return { sub, groups: accounts[sub] }; } };
  },
});

const oidc = provider.callback();
const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

server.on('request', async (req, res) => {
  const url = new URL(req.url, issuer);
  const m = url.pathname.match(/^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/);
  if (!m) return oidc(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      if (req.method === 'GET' && !m[2]) {
        res.setHeader('Content-Type', 'text/html; charset=utf-8');
        res.end(`<!doctype html><title>Test issuer: sign in</title>
<form method="post" action="/interaction/${escape(details.uid)}/login">
<label>Account <input id="login" name="login" autofocus></label>
<button id="submit" type="submit">Sign in</button></form>`);
        return;
      }
      if (req.method === 'POST' && m[2]) {
        let body = '';
        for await (const chunk of req) body += chunk;
        const login = new URLSearchParams(body).get('login') || '';
        if (!Object.hasOwn(accounts, login)) {
          res.statusCode = 403;
          res.end('no such account');
          return;
        }
        await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
        return;
      }
    }
    if (details.prompt.name === 'consent') {
      const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      const missing = details.prompt.details.missingOIDCScope || [];
      if (missing.length) grant.addOIDCScope(missing.join(' '));
      for (const c of details.prompt.details.missingOIDCClaims || []) grant.addOIDCClaims([c]);
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
      return;
    }
    res.statusCode = 400;
    res.end(`unexpected interaction ${details.prompt.name}`);
  } catch (err) {
    res.statusCode = 500;
    res.end(String(err));
  }
});

console.log(JSON.stringify({ issuer }));
process.stdin.resume();
process.stdin.on('end', () => { server.close(); process.exit(0); });
