/** A setting is missing or malformed; the message names the variable and the fix. */
export class ConfigError extends Error {
  override name = 'ConfigError';
  readonly code = 'CONFIG_INVALID';
}
