/**
 * Issue 23 item 1: `start(flowObject)` of a flow already registered costs nothing extra. Before,
 * every such start registered the flow again and nudged the background loop, which then ran a
 * tick of store queries per start (+0.8 ms on SQLite). Counted here as store calls: starting by
 * the flow object makes no more per start than starting by its name.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime, type Store } from "../src/index.ts";

const open: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

/** A store that counts the calls made to it, by method. */
function counting(store: Store): { store: Store; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const proxy = new Proxy(store, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== "function" || typeof key !== "string") return value;
      return (...args: unknown[]) => {
        calls.set(key, (calls.get(key) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

const total = (calls: Map<string, number>) => [...calls.values()].reduce((a, b) => a + b, 0);

describe("start of a registered flow object (issue 23 item 1)", () => {
  it("makes the same store calls as a start by name", async () => {
    const one = flow$("one-step", async (ctx, n: number) => ctx.run("double", () => n * 2));
    const runs = 20;
    const measure = async (by: "object" | "name") => {
      const { store, calls } = counting(memoryStore());
      const r = createRuntime({ store, pollIntervalMs: 60_000 });
      open.push(r);
      r.registerFlow(one);
      // Let the loop's first tick (made by registering) run before counting.
      await new Promise((res) => setTimeout(res, 50));
      calls.clear();
      for (let i = 0; i < runs; i++) {
        const id = `${by}-${i}`;
        const h =
          by === "object" ? await r.start(one, i, { id }) : await r.start("one-step", i, { id });
        await h.result();
        // Room for a tick the start may have asked for.
        await new Promise((res) => setTimeout(res, 5));
      }
      return total(calls);
    };
    const byName = await measure("name");
    const byObject = await measure("object");
    // Per start, not one call more (before: a tick of three queries per start). A late first
    // tick of either runtime, on a loaded machine, may add one call to either count.
    expect(byObject - byName).toBeLessThan(runs);
  });
});
