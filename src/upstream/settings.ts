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
import { DEFAULT_RETRY } from './retry-policy.js';

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
  return {
    baseUrl: s.H2H_BASE_URL,
    apiKey: s.H2H_API_KEY,
    authStyle: s.H2H_AUTH_STYLE,
    connectTimeoutMs: s.H2H_CONNECT_TIMEOUT_MS,
    headersTimeoutMs: s.H2H_HEADERS_TIMEOUT_MS,
    bodyTimeoutMs: s.H2H_BODY_TIMEOUT_MS,
    retryMaxAttempts: s.H2H_RETRY_MAX_ATTEMPTS,
  };
}
export type UpstreamSettings = ReturnType<typeof upstreamSettings>;
