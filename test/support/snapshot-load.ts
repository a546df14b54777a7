/**
 * What test/redteam-snapshot-load.test.ts and its PostgreSQL twin share: a store that records
 * every snapshot it commits, the F5 check of each, and a conversation of every kind of call
 * (parallel waits, a retried step, a child, a timer, the inbox, a rotation every 4 turns).
 */
import { expect } from "vitest";
import {
  canonicalJson,
  flow$,
  foldAll,
  step$,
  type AppendBatch,
  type Runtime,
  type Store,
} from "../../src/index.ts";
import { until } from "../helpers.ts";

export type Shot = { id: string; seq: number; json: string };

/** `inner` with every snapshot it commits recorded, whether riding a batch or saved alone. */
export function recording(inner: Store): { store: Store; shots: Shot[] } {
  const shots: Shot[] = [];
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === "appendMany") {
        return async (batches: readonly AppendBatch[]) => {
          const out = await target.appendMany(batches);
          batches.forEach((b, i) => {
            if (out[i]?.ok && b.snapshot) {
              shots.push({ id: b.executionId, seq: b.snapshot.seq, json: b.snapshot.stateJson });
            }
          });
          return out;
        };
      }
      if (prop === "saveSnapshot") {
        return async (id: string, s: Parameters<Store["saveSnapshot"]>[1]) => {
          shots.push({ id, seq: s.seq, json: JSON.stringify(s.state) });
          return target.saveSnapshot(id, s);
        };
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { store, shots };
}

/** F5 for every snapshot written: its state is the fold of the log through its sequence. */
export async function expectShotsFold(store: Store, shots: readonly Shot[]): Promise<void> {
  for (const s of shots) {
    const log = await store.read(s.id, 0, s.seq + 1);
    expect(log.length, `${s.id}@${s.seq}`).toBe(s.seq + 1);
    const written = canonicalJson(JSON.parse(s.json));
    expect(written, `snapshot of ${s.id} at ${s.seq}`).toBe(canonicalJson(foldAll(log)));
  }
}

let turnsDone = 0;
/** Turns the conversation has finished (its last step ran), across its generations. */
export function resetTurns(): void {
  turnsDone = 0;
}

const flaky = step$("flaky", async (q: string, ectx) => {
  if (ectx.attempt < 2) throw new Error(`overloaded ${ectx.attempt}`);
  return `ok ${q}`;
});
export const kid = flow$("kid", async (ctx, n: number) => ctx.run("k", () => n * 2));
/** A turn of every kind of call, rotating every 4 turns: what a loaded run must snapshot right. */
export const mix = flow$("mix", async (ctx, carry: { t: number } | null) => {
  for (let t = carry?.t ?? 0; ; t++) {
    if (t > 0 && t % 4 === 0 && t !== carry?.t) return ctx.continueAsNew({ t });
    const [a, b] = await ctx.parallel<string>([
      async (c) => {
        const m = await c.suspend<string>();
        return c.run("p1", () => `${m}!`);
      },
      async (c) => {
        const m = await c.receive<string>({ topic: "t" });
        await c.sleep(3);
        return m;
      },
    ]);
    if (a === "bye!") return t;
    await ctx.execute(flaky, `${t}${b}`, { retry: { initialDelayMs: 1, maxDelayMs: 2 } });
    await ctx.awaitChild(await ctx.spawn(kid, t));
    await ctx.decide("d", () => t);
    await ctx.run("big", () => {
      turnsDone = t + 1;
      return "x".repeat(400);
    });
  }
});

export async function turns(r: Runtime, id: string, from: number, to: number): Promise<void> {
  for (let t = from; t < to; t++) {
    await until(async () => (await r.getState(await r.followToHead(id))).status === "parked");
    await r.resume(id, `m${t}`);
    await r.send(id, `s${t}`, { topic: "t" });
    await until(async () => {
      const head = await r.followToHead(id);
      return turnsDone === t + 1 && (await r.getState(head)).status === "parked";
    });
  }
}
