import { z } from 'zod';
import { ConfigError } from '../config/config-error.js';
import { int } from '../config/variables.js';
import { DEFAULT_SIM_URL } from '../simulator/defaults.js';
import {
  AUTH_STYLES,
  DEFAULT_AUTH_STYLE,
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HEADERS_TIMEOUT_MS,
} from './defaults.js';
import { isDefaultUpstream } from './model.js';
import { DEFAULT_RETRY } from './retry-policy.js';
import type { UpstreamAccount } from './upstreams.js';

/** The base URL of the simulator as `npm run sim` starts it: the development value of `H2H_BASE_URL`. */
export const SIMULATOR_BASE_URL = `${DEFAULT_SIM_URL}/v1/member-api`;

/** The upstream client's variables (README, "Settings"). */
export const upstreamVariables = z.object({
  H2H_BASE_URL: z
    .url({ protocol: /^https?$/ })
    .optional()
    .describe('Upstream base URL including `/v1/member-api`. Required by commands that call the upstream.'),
  H2H_UPSTREAMS_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A JSON file listing the upstreams to place orders with, when there are several (docs/upstreams.md); each one's key and webhook secrets come from `H2H_UPSTREAM_<NAME>_API_KEY` and `H2H_UPSTREAM_<NAME>_API_SECRET`. Default: one upstream, named `default`, of `H2H_BASE_URL`, `H2H_API_KEY` and `H2H_API_SECRET`.",
    ),
  H2H_API_KEY: z
    .string()
    .min(1)
    .optional()
    .describe('Upstream API key. Required by commands that call the upstream.'),
  H2H_AUTH_STYLE: z
    .enum(AUTH_STYLES)
    .default(DEFAULT_AUTH_STYLE)
    .describe('How the API key is sent: `x-api-key` header or `Authorization: Bearer`.'),
  H2H_CONNECT_TIMEOUT_MS: int(1).default(DEFAULT_CONNECT_TIMEOUT_MS).describe('Upstream connect timeout.'),
  H2H_HEADERS_TIMEOUT_MS: int(1)
    .default(DEFAULT_HEADERS_TIMEOUT_MS)
    .describe('Upstream timeout until response headers arrive.'),
  H2H_BODY_TIMEOUT_MS: int(1)
    .default(DEFAULT_BODY_TIMEOUT_MS)
    .describe('Upstream timeout between body chunks.'),
  H2H_RETRY_MAX_ATTEMPTS: int(1)
    .default(DEFAULT_RETRY.maxAttempts)
    .describe('Attempts per upstream call, first one included.'),
});

/** The upstream client's section; throws {@link ConfigError} when the URL or key a command needs is missing. */
export function upstreamSettings(config: { settings: z.output<typeof upstreamVariables> }) {
  const s = config.settings;
  if (!s.H2H_BASE_URL || !s.H2H_API_KEY) {
    const missing = [!s.H2H_BASE_URL && 'H2H_BASE_URL', !s.H2H_API_KEY && 'H2H_API_KEY'].filter(Boolean);
    throw new ConfigError(
      `${missing.join(' and ')} must be set to call the upstream (for the simulator: H2H_BASE_URL=${SIMULATOR_BASE_URL} H2H_API_KEY=sim_key_demo_M0001)`,
    );
  }
  return { baseUrl: s.H2H_BASE_URL, apiKey: s.H2H_API_KEY, ...callSettings(s) };
}
export type UpstreamSettings = ReturnType<typeof upstreamSettings>;

/** What every account's client shares: how the key is sent, timeouts and retries. */
function callSettings(s: z.output<typeof upstreamVariables>) {
  return {
    authStyle: s.H2H_AUTH_STYLE,
    connectTimeoutMs: s.H2H_CONNECT_TIMEOUT_MS,
    headersTimeoutMs: s.H2H_HEADERS_TIMEOUT_MS,
    bodyTimeoutMs: s.H2H_BODY_TIMEOUT_MS,
    retryMaxAttempts: s.H2H_RETRY_MAX_ATTEMPTS,
  };
}

/**
 * The client settings of one upstream account (`config.upstreams`, docs/upstreams.md): its base
 * URL and key, with the timeouts and retries every account shares. The default account's are
 * {@link upstreamSettings}, with its message; another's missing key throws a {@link ConfigError}
 * naming the upstream and its variable.
 */
export function accountSettings(
  config: { settings: z.output<typeof upstreamVariables> },
  account: Pick<UpstreamAccount, 'name' | 'baseUrl' | 'apiKey' | 'variables'>,
): UpstreamSettings {
  if (isDefaultUpstream(account.name)) return upstreamSettings(config);
  if (!account.baseUrl || !account.apiKey) {
    // base_url is required by the file's schema: only the key can be missing here.
    throw new ConfigError(
      `upstream "${account.name}": ${account.variables.apiKey} must be set to call it (docs/upstreams.md)`,
    );
  }
  return { baseUrl: account.baseUrl, apiKey: account.apiKey, ...callSettings(config.settings) };
}
