// node-oidc-provider for the end-to-end tests: loopback only, in-memory,
// rotating refresh tokens whose reuse revokes the grant, PKCE S256,
// RFC 8707 resources, dynamic registration, revocation, introspection for
// the protected MCP server, and headless login and consent.
//
// Usage: node oidc-provider.mjs PORT
// Environment: OIDC_PROVIDER_MODULE (path of oidc-provider's lib/index.js),
// RS_CLIENT_ID and RS_CLIENT_SECRET (the resource server's introspection
// client).
// Prints one JSON line {"issuer": ...} when ready. GET /_test/stats gives
// {"token_requests"}.
import http from 'node:http';

const { default: Provider } = await import(process.env.OIDC_PROVIDER_MODULE);
const port = Number(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;

let tokenRequests = 0;

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.RS_CLIENT_ID,
    client_secret: process.env.RS_CLIENT_SECRET,
    grant_types: [],
    response_types: [],
    redirect_uris: [],
  }],
  scopes: ['openid', 'offline_access', 'read'],
  pkce: { required: () => true },
  rotateRefreshToken: true,
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator) => ({
        scope: 'read',
        audience: resourceIndicator,
        accessTokenFormat: 'opaque',
      }),
    },
  },
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
});
provider.proxy = false;

// Count token requests, and log in and consent headlessly: grant whatever
// the prompt asks for.
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/token') {
    tokenRequests += 1;
  }
  if (!ctx.path.startsWith('/interaction/')) {
    await next();
    return;
  }
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: 'user-1' } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const d = prompt.details;
  if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
  if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
  if (d.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  const grantId = await grant.save();
  await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } }, { mergeWithLastSubmission: true });
});

const server = http.createServer((req, res) => {
  if (req.url === '/_test/stats') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ token_requests: tokenRequests }));
    return;
  }
  provider.callback()(req, res);
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  // In-memory state only: nothing to flush, and keep-alive clients must
  // not hold the exit.
  process.on(sig, () => process.exit(0));
}
