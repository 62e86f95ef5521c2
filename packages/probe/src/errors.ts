/**
 * Local errors of `@tether/probe`: the probe could not run its checks. They
 * are not findings about the endpoint (those are classifications in the
 * report), and the CLI exits 2 on them. Match on `code`.
 */
export const ProbeErrorCode = {
  /** The command line is wrong: missing URL, bad flag, `--args` not JSON. */
  usage: 'usage',
  /** The endpoint could not be reached, or answered something that is not MCP. */
  unreachable: 'unreachable',
  /** `initialize` failed or gave no session: nothing to resume. */
  initializeFailed: 'initialize_failed',
  /** No tool was named and none that looks like it streams was found. */
  noStreamingTool: 'no_streaming_tool',
  /** The tool finished before the probe could cut its stream. */
  streamTooShort: 'stream_too_short',
} as const;
export type ProbeErrorCode = (typeof ProbeErrorCode)[keyof typeof ProbeErrorCode];

export class ProbeError extends Error {
  override readonly name: string = 'ProbeError';
  readonly code: ProbeErrorCode;

  constructor(code: ProbeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** True when `err` is a `ProbeError`, optionally of one `code`. */
export function isProbeError(err: unknown, code?: ProbeErrorCode): err is ProbeError {
  return err instanceof ProbeError && (code === undefined || err.code === code);
}
