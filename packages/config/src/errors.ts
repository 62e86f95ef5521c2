/**
 * A flag, environment variable or config-file value was refused. The message
 * names the flag, the value (unless it is a secret) and what is allowed; the
 * services print it and exit 2. Code: `invalid_config`.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'invalid_config';
}
