import { request } from 'undici';
import { apiSettings, loadConfig } from '../../src/config/config.js';

/** The shop API's backlog and Retry-After of the default configuration, for `buildApiApp`. */
export function defaultApiLimits(): { submissionBacklog: number; retryAfterS: number } {
  const { submissionBacklog, retryAfterS } = apiSettings(loadConfig({}));
  return { submissionBacklog, retryAfterS };
}

/** An answer of the shop API: its status and its JSON body. */
export interface ApiAnswer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes; each test reads its own
  body: any;
}

/** A request to the shop API at `origin` with `token`, a body sent as JSON; the answer read. */
export async function sendApi(
  origin: string,
  token: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<ApiAnswer> {
  const answer = await request(`${origin}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: answer.statusCode, body: await answer.body.json() };
}
