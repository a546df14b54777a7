/**
 * Helpers for the chain tests (ADR 0109): waiting for a generation, holding the start-to-commit
 * window open, and forging a sequence 0 straight into a store (a squatter, or a broken link).
 */
import type { AppendBatch, Json, Runtime, Store } from "../../src/index.ts";
import { until } from "../helpers.ts";

/** Waits until generation `n` of `chainId` has a log; its id. */
export async function waitForGeneration(r: Runtime, chainId: string, n: number): Promise<string> {
  const id = `${chainId}~${n}`;
  await until(async () => (await r.readLog(id)).length > 0, 5000);
  return id;
}

/**
 * A store whose append of a batch holding `kind` waits until released: the start-to-commit
 * window of a rotation (the successor exists, the predecessor has not committed), held open.
 * `release(false)` fails the held append without writing it, as a crash there would.
 */
export function gated(inner: Store, kind: string) {
  let held: ((ok: boolean) => void) | undefined;
  let reached: () => void = () => undefined;
  const isHeld = new Promise<void>((r) => (reached = r));
  const store = new Proxy(inner, {
    get(target, key, receiver) {
      if (key !== "appendMany") return Reflect.get(target, key, receiver) as unknown;
      return async (batches: AppendBatch[]) => {
        if (batches.some((b) => b.events.some((e) => e.kind === kind))) {
          reached();
          const ok = await new Promise<boolean>((r) => (held = r));
          if (!ok) throw new Error("simulated crash before the commit");
        }
        return target.appendMany(batches);
      };
    },
  });
  return { store, isHeld, release: (ok: boolean) => held?.(ok) };
}

/** Writes a sequence 0 with `payload` at `id` straight into the store, as no runtime would. */
export async function forge(store: Store, id: string, payload: Record<string, Json>) {
  const lease = await store.acquireLease(id, "forger", { ttlMs: 1000, nowMs: Date.now() });
  await store.appendMany([
    {
      executionId: id,
      events: [{ executionId: id, seq: 0, kind: "EXECUTION_STARTED", at: Date.now(), payload }],
      expectedSeq: 0,
      fence: lease?.fence ?? 0,
      status: "pending",
      flow: "forged",
    },
  ]);
}
