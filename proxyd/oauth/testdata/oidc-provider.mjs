// A node-oidc-provider for the OAuth tests: loopback only, in-memory,
// rotating refresh tokens with reuse detection, PKCE S256, RFC 8707
// resources, dynamic registration, and headless login and consent.
//
// Usage: node oidc-provider.mjs PORT
// Environment: OIDC_PROVIDER_MODULE, the path of oidc-provider's lib/index.js.
// Prints one JSON line {"issuer": ..., "token_requests_url": ...} when ready.
import http from 'node:http';

const { default: Provider } = await import(process.env.OIDC_PROVIDER_MODULE);
const port = Number(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;

let tokenRequests = 0;

const provider = new Provider(issuer, {
  clients: [],
  scopes: ['openid', 'offline_access', 'read'],
  pkce: { required: () => true },
  rotateRefreshToken: true,
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
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

// Headless login and consent: grant whatever the prompt asks for.
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
  if (req.url === '/_test/token-requests') {
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
  process.on(sig, () => server.close(() => process.exit(0)));
}
