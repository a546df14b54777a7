/**
 * The one composition helper (STYLE 11): an onion of middleware around a handler. Each
 * middleware gets the context and `next`, which runs the rest of the chain; calling `next()`
 * twice is a bug and is refused.
 *
 * The one exception is declared, not tolerated: a middleware made with `rerunning` (retry) gets a
 * `next` that runs the rest of the chain afresh on every call, so each attempt passes through
 * every inner middleware exactly once and the inner ones are still held to one `next()` each.
 */
import { InvariantViolation } from "../kernel/errors.ts";

export type Middleware<C> = ((ctx: C, next: () => Promise<unknown>) => Promise<unknown>) & {
  /** Set by `rerunning`: this middleware runs the rest of the chain once per attempt. */
  readonly reruns?: true;
};

/** Marks a middleware whose `next()` re-runs everything inside it (one call per attempt). */
export function rerunning<C>(
  mw: (ctx: C, next: () => Promise<unknown>) => Promise<unknown>,
): Middleware<C> {
  return Object.assign(mw, { reruns: true as const });
}

export function compose<C>(
  middleware: readonly Middleware<C>[],
  handler: (ctx: C) => Promise<unknown>,
): (ctx: C) => Promise<unknown> {
  const from = (ctx: C, start: number): Promise<unknown> => {
    let last = start - 1;
    const dispatch = async (i: number): Promise<unknown> => {
      if (i <= last) throw new InvariantViolation("next() was called twice by one middleware");
      last = i;
      const mw = middleware[i];
      if (!mw) return handler(ctx);
      return mw(ctx, mw.reruns ? () => from(ctx, i + 1) : () => dispatch(i + 1));
    };
    return dispatch(start);
  };
  return (ctx) => from(ctx, 0);
}
