/**
 * The fakes `bench spend` drives its paths with, shaped as test/spend-paths.test.ts's: each
 * counts what it really spent (`real`, as the provider would bill it) apart from what Loom
 * records, and what each path's outcome is measured from.
 *
 * Invariants:
 * S1. `real` grows before the effect can be stopped, refused or fail: an attempt that started is
 *     billed whatever happens to it after.
 * S2. Without reservations an effect is the same one minus its `reserve`, so the two runs of a
 *     path differ in that alone.
 */
import {
  createRuntime,
  isLoomError,
  memoryStore,
  QuotaExceededError,
  type Effect,
  type EffectContext,
  type ResourceDelta,
  type ResourceSnapshot,
  type Runtime,
  type RuntimeOptions,
} from "../src/index.ts";

/** What every call of the paid tool costs, in output tokens, and declares it may cost. */
export const COST = 300;

/** What an effect really spent, counted by the effect itself, and how often it ran. */
export interface Spent {
  real: number;
  calls: number;
}

export interface PaidTool {
  effect: Effect<null, number>;
  spent: Spent;
  /** What one call declares it may spend (the reserving effect's, also when this one is not). */
  reservation: number;
}

export const tokensOf = (r: ResourceDelta | ResourceSnapshot | undefined): number =>
  (r?.tokens?.input ?? 0) + (r?.tokens?.output ?? 0);

/** The effect without its `reserve` (S2). */
export function withoutReserve<I, O>(effect: Effect<I, O>): Effect<I, O> {
  const bare = { ...effect };
  delete bare.reserve;
  return bare;
}

/**
 * A paid tool: each call bills COST tokens (S1), waits a little so that calls in parallel are all
 * in flight together, and meters COST. With `failFirst`, its first attempts fail after billing.
 */
export function paidTool(reserving: boolean, failFirst = 0): PaidTool {
  const spent: Spent = { real: 0, calls: 0 };
  const effect: Effect<null, number> = {
    name: "paid",
    reserve: () => ({ tokens: { output: COST } }),
    run: async (_input: null, ectx: EffectContext) => {
      spent.calls += 1;
      spent.real += COST;
      await new Promise((r) => setTimeout(r, 5));
      ectx.meter({ tokens: { output: COST } });
      if (spent.calls <= failFirst) throw new Error("the provider failed after billing");
      return COST;
    },
  };
  return {
    effect: reserving ? effect : withoutReserve(effect),
    spent,
    reservation: tokensOf(effect.reserve?.(null)),
  };
}

/**
 * A call that bills COST tokens (S1) and then hangs until its runtime stops it: an owner that
 * goes away in the middle of every attempt.
 */
export function hangingCall(reserving: boolean): PaidTool {
  const spent: Spent = { real: 0, calls: 0 };
  const effect: Effect<null, number> = {
    name: "hang",
    reserve: () => ({ tokens: { output: COST } }),
    run: async (_input: null, ectx: EffectContext) => {
      spent.calls += 1;
      spent.real += COST;
      return new Promise<number>((_, reject) =>
        ectx.signal.addEventListener("abort", () => reject(new Error("stopped"))),
      );
    },
  };
  return {
    effect: reserving ? effect : withoutReserve(effect),
    spent,
    reservation: tokensOf(effect.reserve?.(null)),
  };
}

/** A budget's refusal becomes the value "refused"; anything else is a failure of the bench. */
export const refusedOr = (e: unknown): "refused" => {
  if (e instanceof QuotaExceededError || isLoomError(e, "LOOM_QUOTA_EXCEEDED")) return "refused";
  throw e;
};

/** What the log says was spent by `id` (its whole chain's, for a rotated head). */
export async function recordedTokens(r: Runtime, id: string): Promise<number> {
  return tokensOf((await r.getState(id))._resources);
}

/** QUOTA_EXCEEDED facts in every execution of the runtime's store: the budget's refusals. */
export async function refusals(r: Runtime): Promise<number> {
  let n = 0;
  for (const e of await r.store.list({ limit: 10_000 })) {
    const log = await r.store.read(e.executionId, 0);
    n += log.filter((ev) => ev.kind === "QUOTA_EXCEEDED").length;
  }
  return n;
}

/** A memory-store runtime for `fn`, closed afterwards. */
export async function withRuntime<T>(
  options: Partial<RuntimeOptions>,
  fn: (r: Runtime) => Promise<T>,
): Promise<T> {
  const r = createRuntime({ store: memoryStore(), ...options });
  try {
    return await fn(r);
  } finally {
    await r.close();
  }
}

/** One run of one path: the figures its JSON line carries, before the overshoot. */
export interface Measured {
  budget: number;
  realSpent: number;
  recordedSpent: number;
  reservation: number;
  calls: number;
  refusals: number;
}

/** A path, run with its effects' reservations or without them (S2). */
export type PathDriver = (reserving: boolean) => Promise<Measured>;

/** The figures of a path whose spend is the paid tool's and whose log is `id`'s. */
export async function measure(
  r: Runtime,
  id: string,
  budget: number,
  tool: PaidTool,
): Promise<Measured> {
  return {
    budget,
    realSpent: tool.spent.real,
    recordedSpent: await recordedTokens(r, id),
    reservation: tool.reservation,
    calls: tool.spent.calls,
    refusals: await refusals(r),
  };
}
