/**
 * `continueEvery(n)` (ADR 0109 D1, D6): a flow counts its own turns and rotates every n. There
 * is no `shouldContinueAsNew()`: a count of the log's length differs on every re-run, so it
 * would not replay; a counter made inside the body, per generation, does.
 *
 * @example
 * const chat = flow$("chat", async (ctx, carry: { summary: string } | null) => {
 *   const rotate = continueEvery(500);
 *   for (;;) {
 *     const msg = await ctx.receive<string>();
 *     // ... answer it ...
 *     if (rotate.tick()) return ctx.continueAsNew({ summary: "..." });
 *   }
 * });
 */
import { InvalidInputError } from "../kernel/errors.ts";

export interface TurnCounter {
  /** Counts a turn; true on every n-th. */
  tick(): boolean;
  /** Turns counted in this generation. */
  readonly turns: number;
}

export function continueEvery(n: number): TurnCounter {
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new InvalidInputError(
      `continueEvery needs a whole number of turns >= 1, got ${String(n)}`,
    );
  }
  let turns = 0;
  return {
    tick() {
      turns++;
      return turns % n === 0;
    },
    get turns() {
      return turns;
    },
  };
}
