import { apiSettings, loadConfig } from '../../src/config/config.js';

/** The shop API's backlog and Retry-After of the default configuration, for `buildApiApp`. */
export function defaultApiLimits(): { submissionBacklog: number; retryAfterS: number } {
  const { submissionBacklog, retryAfterS } = apiSettings(loadConfig({}));
  return { submissionBacklog, retryAfterS };
}
