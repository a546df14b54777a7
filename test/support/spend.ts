/**
 * The fakes the spend tests share (issue 20): a paid tool that counts what it really spends apart
 * from what Loom records, a runtime factory that closes what it made after each test, and the
 * readings of a refusal and of what the log records.
 */
import { afterEach } from "vitest";
import {
  createRuntime,
  isLoomError,
  memoryStore,
  QuotaExceededError,
  type Runtime,
  type RuntimeOptions,
} from "../../src/index.ts";

/** What one call of the paid tool costs, unless it is given another. */
export const COST = 300;

export interface PaidOptions {
  name?: string;
  /** What a call costs, reserves and meters (default COST). */
  cost?: number;
  /** How long a call holds before it meters (default 5 ms: other branches get admitted). */
  holdMs?: number;
  /** What a call declares it may spend (default its cost). */
  reserve?: () => unknown;
  /** What a call really spends and meters, when it is not what it reserves. */
  meter?: number;
  /** End a call at once when its signal aborts. */
  honorAbort?: boolean;
}

type Ectx = { meter(d: object): void; signal: AbortSignal };

/**
 * A paid tool: each call is billed the moment it is sent (the provider bills even if the client
 * goes away), counted in `spent`; it reserves its cost and meters what it spent when it returns.
 */
export function paidTool(opts: PaidOptions = {}) {
  const cost = opts.cost ?? COST;
  const spends = opts.meter ?? cost;
  const spent = { real: 0, calls: 0 };
  const effect = {
    name: opts.name ?? "paid",
    reserve: (opts.reserve ?? (() => ({ tokens: { output: cost } }))) as () => {
      tokens: { output: number };
    },
    run: async (_: null, ectx: Ectx) => {
      spent.calls++;
      spent.real += spends;
      await new Promise<void>((res, rej) => {
        const t = setTimeout(res, opts.holdMs ?? 5);
        if (opts.honorAbort) {
          ectx.signal.addEventListener("abort", () => {
            clearTimeout(t);
            rej(new Error("aborted", { cause: ectx.signal.reason }));
          });
        }
      });
      ectx.meter({ tokens: { output: spends } });
      return spends;
    },
  };
  return { effect, spent };
}

/** Runtimes on fresh memory stores, closed after each test of the file that asks for them. */
export function spendRuntimes(): (options?: Partial<RuntimeOptions>) => Runtime {
  const open: Runtime[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((r) => r.close()));
  });
  return (options = {}) => {
    const r = createRuntime({ store: memoryStore(), ...options });
    open.push(r);
    return r;
  };
}

/** "refused" for a budget's refusal; anything else is rethrown. */
export const refusedOr = (e: unknown): "refused" => {
  if (e instanceof QuotaExceededError || isLoomError(e, "LOOM_QUOTA_EXCEEDED")) return "refused";
  throw e;
};

/** "refused" for a budget's refusal, another Loom error's code, else rethrown. */
export const refusedOrCode = (e: unknown): string => {
  if (e instanceof QuotaExceededError || isLoomError(e, "LOOM_QUOTA_EXCEEDED")) return "refused";
  if (isLoomError(e)) return e.code;
  throw e;
};

/** The tokens the log records as spent by `id` (input and output). */
export async function tokensOf(r: Runtime, id: string): Promise<number> {
  const t = (await r.getState(id))._resources?.tokens;
  return (t?.input ?? 0) + (t?.output ?? 0);
}
