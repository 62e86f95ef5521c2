import { ConfigError } from './errors.js';

/** One flag of a service: its environment twin, `--help` text and default. */
export interface FlagSpec {
  readonly flag: string;
  readonly env: string;
  readonly help: string;
  readonly fallback: string;
  /** Given more than once (or as an array in the config file) the values add up. */
  readonly repeat?: boolean;
}

/** How a service treats some of its flags. */
export interface FlagOptions {
  /** Joins a repeated flag's values (argv repeats, config-file arrays). Default: `','` for every flag. */
  readonly separator?: (flag: string) => string;
  /** Flags whose values are secrets: a config-file error names the key but withholds the value. Default: none. */
  readonly secretFlags?: readonly string[];
}

/** The three layers `rawValue` weighs; `file` is empty when no config file is named. */
export interface FlagSources<Name extends string = string> {
  readonly given: ReadonlyMap<Name, readonly string[]>;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly file: ReadonlyMap<string, string>;
}

/** Column widths of `helpLines`. */
export interface HelpLayout {
  readonly flagWidth: number;
  readonly envWidth: number;
}

/** Handled by each service's `main` before parsing; they take no value, so they must not eat the next argument. */
const SWITCHES: ReadonlySet<string> = new Set(['--print-config', '--help', '-h']);

/**
 * Reads argv only and keeps every repeat in order: whether repeats add up is
 * decided later, per flag, and env and file are weighed in `rawValue`, so
 * this stays the one place that knows argv syntax (`--name value`,
 * `--name=value`).
 *
 * @throws ConfigError `invalid_config` on a positional argument, an unknown flag, or a flag without a value
 */
export function parseArgs<F extends FlagSpec>(argv: readonly string[], flags: readonly F[]): Map<F['flag'], string[]> {
  const given = new Map<F['flag'], string[]>();
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    if (SWITCHES.has(arg)) continue;
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument ${JSON.stringify(arg)}; flags look like --name value (see --help)`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const spec = flags.find((f) => f.flag === name);
    if (spec === undefined) throw new ConfigError(`unknown flag --${name} (see --help)`);
    const value = eq === -1 ? argv[i + 1] : arg.slice(eq + 1);
    if (eq === -1) i += 1;
    if (value === undefined) throw new ConfigError(`flag --${name} needs a value`);
    given.set(spec.flag, [...(given.get(spec.flag) ?? []), value]);
  }
  return given;
}

/**
 * Keyed by flag names so the file, the flags and `--help` share one
 * vocabulary. Arrays are joined like argv repeats, so the value checks
 * downstream see one format whatever the layer. Unknown keys are refused
 * rather than ignored (a misspelt key would otherwise fall back to a default
 * unnoticed), and so is `config`: files do not chain. A secret's value is
 * never repeated in an error, since errors end up in logs.
 *
 * @throws ConfigError `invalid_config` naming the file, the key and what is allowed
 */
export function readConfigFile<F extends FlagSpec>(
  path: string,
  readFile: (path: string) => string,
  flags: readonly F[],
  options: FlagOptions = {},
): Map<string, string> {
  let value: unknown;
  try {
    value = JSON.parse(readFile(path));
  } catch (err) {
    throw new ConfigError(`invalid --config ${JSON.stringify(path)}: ${(err as Error).message}`, { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError(`invalid --config ${JSON.stringify(path)}: expected a JSON object keyed by flag names`);
  const out = new Map<string, string>();
  for (const [key, item] of Object.entries(value)) {
    const spec: FlagSpec | undefined = flags.find((f) => f.flag === key);
    if (spec === undefined || key === 'config') throw new ConfigError(`invalid --config ${JSON.stringify(path)}: unknown key ${JSON.stringify(key)} (keys are flag names, see --help)`);
    const repeat = spec.repeat === true;
    if (repeat && Array.isArray(item) && item.every((v) => typeof v === 'string')) out.set(key, item.join(separatorOf(key, options)));
    else if (typeof item === 'string' || (typeof item === 'number' && Number.isFinite(item))) out.set(key, String(item));
    else {
      const shown = options.secretFlags?.includes(key) === true ? 'not a string' : JSON.stringify(item);
      throw new ConfigError(`invalid --config ${JSON.stringify(path)}: key ${JSON.stringify(key)} is ${shown}; allowed: a string or number${repeat ? ', or an array of strings' : ''}`);
    }
  }
  return out;
}

/**
 * Precedence: flags, then environment, then the config file, then the
 * default. A layer that sets a flag wins as a whole (repeated flags replace
 * the file's array, they do not add to it), so an operator overriding a value
 * never gets a mix of two layers.
 */
export function rawValue<F extends FlagSpec>(flags: readonly F[], name: F['flag'], sources: FlagSources<F['flag']>, options: FlagOptions = {}): string {
  const spec = flags.find((f) => f.flag === name);
  if (spec === undefined) throw new Error(`no flag named ${JSON.stringify(name)} in the table`);
  const fromFlag = sources.given.get(name);
  if (fromFlag !== undefined) return fromFlag.join(separatorOf(name, options));
  return sources.env[spec.env] ?? sources.file.get(name) ?? spec.fallback;
}

/** What `readSettings` gives a service: each flag's winning raw value, and the config file it read. */
export interface Settings<Name extends string> {
  raw(name: Name): string;
  /** The `--config` file read (from the flag or its environment twin), or '' for none. */
  readonly configPath: string;
}

/**
 * Sets up the four layers once for a service: argv parsed, the config file
 * (named by the last `--config`, else its environment twin) read, and
 * `raw(name)` resolving each flag by `rawValue`'s precedence. Each service
 * then checks what the values mean.
 *
 * @throws ConfigError `invalid_config` from `parseArgs` or `readConfigFile`
 */
export function readSettings<F extends FlagSpec>(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string,
  flags: readonly F[],
  options: FlagOptions = {},
): Settings<F['flag']> {
  const given = parseArgs(argv, flags);
  const configEnv = flags.find((f) => f.flag === 'config')?.env;
  const configPath = given.get('config' as F['flag'])?.at(-1) ?? (configEnv === undefined ? undefined : env[configEnv]) ?? '';
  const file = configPath === '' ? new Map<string, string>() : readConfigFile(configPath, readFile, flags, options);
  return { configPath, raw: (name) => rawValue(flags, name, { given, env, file }, options) };
}

/**
 * Built from the same table the parser reads, so `--help` can never list a
 * flag the parser refuses or miss one it accepts. Widths are the caller's, to
 * line up with the lines it adds itself.
 */
export function helpLines(flags: readonly FlagSpec[], layout: HelpLayout): string[] {
  return flags.map((f) => {
    const fallback = f.fallback === '' ? '' : ` (default ${f.fallback})`;
    return `  --${f.flag.padEnd(layout.flagWidth)} ${f.env.padEnd(layout.envWidth)} ${f.help}${fallback}`;
  });
}

function separatorOf(flag: string, options: FlagOptions): string {
  return options.separator?.(flag) ?? ',';
}
