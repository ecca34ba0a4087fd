import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ApiScope, ApiToken, ApiTokens } from '../store/api-tokens.js';
import { ApiHttpError } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a route needs; routes without one are public (the OpenAPI document). */
    scope?: ApiScope;
  }
  interface FastifyRequest {
    token?: ApiToken;
  }
}

const CREATE_TOKEN_HINT = 'create one with `h2h-sync tokens create --name NAME --scope orders:read`';

/**
 * The bearer token of a request, checked for `scope`, or the 401/403 that says what to fix
 * (docs/api.md, "Tokens").
 */
async function authenticate(tokens: ApiTokens, request: FastifyRequest, scope: ApiScope): Promise<ApiToken> {
  const header = request.headers.authorization;
  const bearer = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
  if (!bearer) {
    throw new ApiHttpError('TOKEN_MISSING', `send Authorization: Bearer <token>; ${CREATE_TOKEN_HINT}`);
  }
  const result = await tokens.authenticate(bearer);
  if (!result.ok) {
    throw result.refusal === 'revoked'
      ? new ApiHttpError('TOKEN_REVOKED', `this token was revoked; ${CREATE_TOKEN_HINT}`)
      : new ApiHttpError('TOKEN_INVALID', `the token is not one of this h2h-sync; ${CREATE_TOKEN_HINT}`);
  }
  if (!result.token.scopes.includes(scope)) {
    throw new ApiHttpError(
      'SCOPE_MISSING',
      `token ${result.token.id} (${result.token.name}) lacks the scope ${scope}: create a token with --scope ${scope}`,
    );
  }
  return result.token;
}

/**
 * Bearer tokens with scopes for every route of the app it is registered on: a route names the
 * scope it needs in its `config` (`config: { scope: 'orders:write' }`), and its requests are
 * refused before anything else runs unless their token has it; `request.token` is the token.
 * Not encapsulated (`skip-override`), so its hook covers the routes of every resource plugin.
 */
export const authPlugin: FastifyPluginAsync<{ tokens: ApiTokens }> = async (app, { tokens }) => {
  app.addHook('onRequest', async (request) => {
    const scope = request.routeOptions.config.scope;
    if (!scope) return;
    request.token = await authenticate(tokens, request, scope);
  });
};
Object.assign(authPlugin, { [Symbol.for('skip-override')]: true });
