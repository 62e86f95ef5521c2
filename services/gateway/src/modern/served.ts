/**
 * What a handler of the 2026-07-28 era answers the dispatcher: it served the
 * request (undefined), or the request is not its own after all and goes to
 * the upstream untouched (`PASS`). Only the dispatcher passes a request on.
 */
export const PASS = 'pass' as const;
export type Served = Promise<typeof PASS | void>;
