/**
 * @tether/probe: tells in one command whether an MCP Streamable HTTP endpoint
 * resumes correctly (bin `tether-probe`). Explicit named exports only; users'
 * symbols first.
 */

export { runProbe, unknownIdLike, MALFORMED_CURSOR } from './probe.js';
export type { ProbeOptions, ProbeReport } from './probe.js';
export type { CursorAnswer, ResumeSummary, StreamSummary } from './steps.js';
export { Classification, GUIDANCE, isSilent } from './classification.js';
export { exitCodeOf, formatHuman, formatJson } from './report.js';
export { main, parseCliArgs, USAGE } from './cli.js';
export type { CliArgs } from './cli.js';
export { ProbeError, ProbeErrorCode, isProbeError } from './errors.js';
