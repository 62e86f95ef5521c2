// @tether/inspect: what an operator sees of sessions (issue 14).
export type { ChainCheck, Connection, EventMark, SessionSummary, SessionTimeline, StreamLane, WriterSpan } from './model.js';
