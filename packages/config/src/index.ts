/**
 * @tether/config: the flag, environment and `--config` file parsing shared by
 * the Tether services, so both read their settings the same way. Each service
 * keeps its own flag table and its own checks of what the values mean.
 * No runtime dependencies and no `node:` imports: files are read through a
 * function the caller passes.
 *
 * Explicit named exports only (never `export *`).
 */

// Flags, environment and the config file.
export { readSettings, parseArgs, readConfigFile, rawValue, helpLines } from './flags.js';
export type { FlagSpec, FlagOptions, FlagSources, HelpLayout, Settings } from './flags.js';

// Value checks.
export { list, int, duration, matching } from './values.js';

// Errors.
export { ConfigError } from './errors.js';
