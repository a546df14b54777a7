/**
 * The one composition helper (STYLE 11): an onion of middleware around a handler. Each
 * middleware gets the context and `next`, which runs the rest of the chain; calling `next()`
 * twice is a bug and is refused.
 */
import { InvariantViolation } from "../kernel/errors.ts";

export type Middleware<C> = (ctx: C, next: () => Promise<unknown>) => Promise<unknown>;

export function compose<C>(
  middleware: readonly Middleware<C>[],
  handler: (ctx: C) => Promise<unknown>,
): (ctx: C) => Promise<unknown> {
  return (ctx) => {
    let last = -1;
    const dispatch = async (i: number): Promise<unknown> => {
      if (i <= last) throw new InvariantViolation("next() was called twice by one middleware");
      last = i;
      const mw = middleware[i];
      return mw ? mw(ctx, () => dispatch(i + 1)) : handler(ctx);
    };
    return dispatch(0);
  };
}
