/**
 * S30, S31, S34 for waiters (spi-limiters.ts, ../../store/limiter-rules.ts LR5): first come, first
 * served across the fleet, positions, places kept and lost, and what reserve prunes. Times are
 * explicit nowMs values near T0.
 */
import { expect, it } from "./vitest.ts";
import { LIMITER_STEP_MS } from "../../store/limiter-rules.ts";
import type { Store } from "../../store/spi.ts";
import { T0, type Harness } from "./helpers.ts";
import { ask, granted, LATER, limitOf, refused, WINDOW_MS } from "./limiter-helpers.ts";

const one = limitOf({ requests: 1 });

/** A store whose limiter L holds a's grant at T0 and b as a waiter since T0 + 10. */
async function aGrantedBWaiting(h: Harness, waitUntilMs = LATER): Promise<Store> {
  const store = await h.open();
  await granted(store, one, ask("a"), T0);
  await refused(store, one, ask("b", { waitUntilMs }), T0 + 10, T0 + WINDOW_MS);
  return store;
}

export function limiterWaiterTests(h: Harness): void {
  it("S30: a younger ask that fits is refused while an older waiter is live, and granted after it", async () => {
    const store = await aGrantedBWaiting(h);
    const after = T0 + WINDOW_MS;
    // c fits (a left the window) but b came first: a step, then b's grant is in the way.
    await refused(store, one, ask("c"), after, after + LIMITER_STEP_MS, 1);
    await granted(store, one, ask("b"), after);
    await refused(store, one, ask("c"), after + LIMITER_STEP_MS, after + WINDOW_MS, 0);
    await granted(store, one, ask("c"), after + WINDOW_MS);
  });

  it("S32: a withdrawn waiter is in no one's way", async () => {
    const store = await aGrantedBWaiting(h);
    const after = T0 + WINDOW_MS;
    await refused(store, one, ask("c"), after, after + LIMITER_STEP_MS, 1);
    await store.withdraw("L", "b");
    await store.withdraw("L", "never-asked");
    expect((await store.limiterView("L", after)).waiting.map((w) => w.id)).toEqual(["c"]);
    await granted(store, one, ask("c"), after);
  });

  it("S30: a waiter past its waitUntilMs is in no one's way", async () => {
    const after = T0 + WINDOW_MS;
    const store = await aGrantedBWaiting(h, after + 50);
    await refused(store, one, ask("c"), after + 49, after + 49 + LIMITER_STEP_MS, 1);
    expect((await store.limiterView("L", after + 50)).waiting.map((w) => w.id)).toEqual(["c"]);
    await granted(store, one, ask("c"), after + 50);
  });

  it("S31: positions count the live waiters with an older place; the view lists them oldest first", async () => {
    const store = await h.open();
    await granted(store, one, ask("a"), T0);
    await refused(store, one, ask("w1"), T0 + 1, T0 + WINDOW_MS, 0);
    await refused(store, one, ask("w2"), T0 + 2, T0 + WINDOW_MS, 1);
    await refused(store, one, ask("w3"), T0 + 2, T0 + WINDOW_MS, 2);
    expect((await store.limiterView("L", T0 + 3)).waiting).toEqual([
      { id: "w1", executionId: "e-w1", sinceMs: T0 + 1 },
      { id: "w2", executionId: "e-w2", sinceMs: T0 + 2 },
      { id: "w3", executionId: "e-w3", sinceMs: T0 + 2 },
    ]);
    // LR5: asking again keeps the place.
    await refused(store, one, ask("w2"), T0 + 50, T0 + WINDOW_MS, 1);
    await store.withdraw("L", "w1");
    await refused(store, one, ask("w3"), T0 + 60, T0 + WINDOW_MS, 1);
    await refused(store, one, ask("w2"), T0 + 60, T0 + WINDOW_MS, 0);
    expect((await store.limiterView("L", T0 + 60)).waiting.map((w) => w.sinceMs)).toEqual([
      T0 + 2,
      T0 + 2,
    ]);
  });

  it("LR5: a waiter that asks again after its waitUntilMs has a new place, behind those who kept theirs", async () => {
    const store = await h.open();
    await granted(store, one, ask("a"), T0);
    await refused(store, one, ask("early", { waitUntilMs: T0 + 50 }), T0 + 1, T0 + WINDOW_MS, 0);
    await refused(store, one, ask("late"), T0 + 2, T0 + WINDOW_MS, 1);
    await refused(store, one, ask("late"), T0 + 60, T0 + WINDOW_MS, 0);
    await refused(store, one, ask("early"), T0 + 60, T0 + WINDOW_MS, 1);
    expect((await store.limiterView("L", T0 + 60)).waiting).toEqual([
      { id: "late", executionId: "e-late", sinceMs: T0 + 2 },
      { id: "early", executionId: "e-early", sinceMs: T0 + 60 },
    ]);
  });
}

/** S34 */
export function limiterPruneTests(h: Harness): void {
  it("S34: reserve removes settled grants out of the window and expired waiters; a live hold stays", async () => {
    const store = await h.open();
    const big = ask("big", { requests: 5 });
    await store.reserve("P", one, ask("p"), T0);
    await store.settle("P", "p", { inputTokens: 1, outputTokens: 1 }, T0 + 1);
    await store.reserve("Q", one, ask("q"), T0);
    await store.blockLimiter("R", LATER);
    await store.reserve("R", one, ask("r", { waitUntilMs: T0 + 100 }), T0);
    expect(await store.limiterNames()).toEqual(["P", "Q", "R"]);
    // An ask too big to fit ever writes nothing (LR3), but prunes what it passes.
    for (const name of ["P", "Q", "R"]) await store.reserve(name, one, big, T0 + 2 * WINDOW_MS);
    // q is out of the window but not settled and held until LATER: it still holds a slot.
    expect(await store.limiterNames()).toEqual(["Q"]);
    expect(await store.limiterView("Q", T0 + 2 * WINDOW_MS)).toMatchObject({
      requests: 0,
      inFlight: 1,
    });
    // Pruned, p's id is a new ask: it is charged again.
    expect(await store.reserve("P", one, ask("p"), T0 + 2 * WINDOW_MS)).toEqual({ granted: true });
    expect(await store.limiterView("P", T0 + 2 * WINDOW_MS)).toMatchObject({ requests: 1 });
  });

  it("S34: what a busy limiter keeps is bounded by a window, however long it runs", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 10 });
    for (let i = 0; i < 60; i++) {
      const at = T0 + i * 100;
      const id = `g${i}`;
      expect(await store.reserve("L", limit, ask(id), at)).toEqual({ granted: true });
      await store.settle("L", id, { inputTokens: 0, outputTokens: 0 }, at);
    }
    const view = await store.limiterView("L", T0 + 5_900);
    expect(view).toMatchObject({ requests: 10, inFlight: 0, waiting: [] });
    // The first grants are gone: their ids charge again.
    expect(await store.reserve("L", limit, ask("g0"), T0 + 5_950)).toMatchObject({
      granted: false,
    });
  });
}
