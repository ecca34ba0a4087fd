/**
 * The upstream client's choices and defaults, in a module that imports nothing: the config schema
 * names them without loading the client and its HTTP library (undici).
 */

/** The ways the API key can be sent (spec §5 rule 1). */
export const AUTH_STYLES = ['x-api-key', 'bearer'] as const;
/** How the API key is sent (spec §5 rule 1). */
export type AuthStyle = (typeof AUTH_STYLES)[number];

/** Default of `UpstreamClientOptions.authStyle`. */
export const DEFAULT_AUTH_STYLE: AuthStyle = 'x-api-key';
/** Default of `UpstreamClientOptions.connectTimeoutMs`. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/** Default of `UpstreamClientOptions.headersTimeoutMs` (undici's own is 300 s). */
export const DEFAULT_HEADERS_TIMEOUT_MS = 15_000;
/** Default of `UpstreamClientOptions.bodyTimeoutMs`. */
export const DEFAULT_BODY_TIMEOUT_MS = 15_000;
