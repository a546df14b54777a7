/**
 * S30..S34: rate limiters (spi-limiters.ts), with the rules of ../../store/limiter-rules.ts
 * (LR1..LR5). Every time is an explicit nowMs near T0; none is the wall clock. This file holds the
 * limits (each dimension, the sliding window, settles, holds, blocks, idempotence); the waiters'
 * order, positions and pruning are limiters-waiters.ts's.
 */
import { describe, expect, it } from "./vitest.ts";
import { LIMITER_STEP_MS } from "../../store/limiter-rules.ts";
import { T0, type Harness } from "./helpers.ts";
import { ask, granted, limitOf, refused, WINDOW_MS } from "./limiter-helpers.ts";
import { limiterPruneTests, limiterWaiterTests } from "./limiters-waiters.ts";

export function limiterSuite(h: Harness): void {
  describe("rate limiters: limits and the window (S30, S31)", () => windowTests(h));
  describe("rate limiters: retry times, ids, independence (S30, S31, LR3)", () =>
    retryAndIdTests(h));
  describe("rate limiters: bad input (LR1)", () => inputTests(h));
  describe("rate limiters: settles, holds and blocks (S32, S33)", () => settleTests(h));
  describe("rate limiters: waiters and positions (S30, S31)", () => limiterWaiterTests(h));
  describe("rate limiters: pruning (S34)", () => limiterPruneTests(h));
}

function windowTests(h: Harness): void {
  it("S30: grants requests up to the limit in a sliding window; one leaves after windowMs", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 2 });
    await granted(store, limit, ask("a"), T0);
    await granted(store, limit, ask("b"), T0 + 100);
    // S31: it fits once a leaves the window (T0 + windowMs).
    await refused(store, limit, ask("c"), T0 + 200, T0 + WINDOW_MS);
    await refused(store, limit, ask("c"), T0 + WINDOW_MS - 1, T0 + WINDOW_MS);
    await granted(store, limit, ask("c"), T0 + WINDOW_MS);
    expect(await store.limiterView("L", T0 + WINDOW_MS)).toMatchObject({ requests: 2 });
    await refused(store, limit, ask("d"), T0 + WINDOW_MS, T0 + 100 + WINDOW_MS);
  });

  it("S30: each token dimension is limited on its own, tokens as input and output together", async () => {
    const store = await h.open();
    const input = { windowMs: WINDOW_MS, inputTokens: 100 };
    await granted(store, input, ask("i1", { inputTokens: 60, outputTokens: 500 }), T0);
    await refused(store, input, ask("i2", { inputTokens: 41 }), T0 + 1, T0 + WINDOW_MS);
    await store.withdraw("L", "i2");
    await granted(store, input, ask("i3", { inputTokens: 40 }), T0 + 2);

    const output = { windowMs: WINDOW_MS, outputTokens: 10 };
    const s2 = await h.open();
    await granted(s2, output, ask("o1", { outputTokens: 10, inputTokens: 900 }), T0);
    await refused(s2, output, ask("o2", { outputTokens: 1 }), T0 + 5, T0 + WINDOW_MS);

    const tokens = { windowMs: WINDOW_MS, tokens: 100 };
    const s3 = await h.open();
    await granted(s3, tokens, ask("t1", { inputTokens: 30, outputTokens: 30 }), T0);
    await refused(s3, tokens, ask("t2", { inputTokens: 20, outputTokens: 21 }), T0, T0 + WINDOW_MS);
    await s3.withdraw("L", "t2");
    await granted(s3, tokens, ask("t3", { inputTokens: 20, outputTokens: 20 }), T0);
    expect(await s3.limiterView("L", T0)).toMatchObject({
      requests: 2,
      inputTokens: 50,
      outputTokens: 50,
      inFlight: 2,
    });
  });
}

function retryAndIdTests(h: Harness): void {
  it("S31: retryAtMs is when enough of the oldest grants leave, for the dimension furthest off", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 3, inputTokens: 100 });
    await granted(store, limit, ask("a", { inputTokens: 50 }), T0);
    await granted(store, limit, ask("b", { inputTokens: 10 }), T0 + 100);
    await granted(store, limit, ask("c", { inputTokens: 10 }), T0 + 200);
    // Two requests must leave (a and b), so T0 + 100 + windowMs.
    await refused(store, limit, ask("x", { requests: 2 }), T0 + 300, T0 + 100 + WINDOW_MS);
    await store.withdraw("L", "x");
    // 30 tokens free, 60 asked: a's 50 must leave.
    await refused(
      store,
      limit,
      ask("y", { requests: 0, inputTokens: 60 }),
      T0 + 300,
      T0 + WINDOW_MS,
    );
    await store.withdraw("L", "y");
    // 100 tokens asked: a, b and c must all leave.
    const all = ask("z", { requests: 0, inputTokens: 100 });
    await refused(store, limit, all, T0 + 300, T0 + 200 + WINDOW_MS);
    await granted(store, limit, all, T0 + 200 + WINDOW_MS);
  });

  it("S30: an id already granted is granted again without a second charge, even when full", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 1, inputTokens: 10, concurrent: 1 });
    await granted(store, limit, ask("a", { inputTokens: 10 }), T0);
    await granted(store, limit, ask("a", { inputTokens: 10 }), T0 + 1);
    await granted(store, limit, ask("a", { inputTokens: 10 }), T0 + 2);
    expect(await store.limiterView("L", T0 + 2)).toMatchObject({
      requests: 1,
      inputTokens: 10,
      inFlight: 1,
      waiting: [],
    });
  });

  it("LR3: an ask over a limit on its own is refused for a window and holds no place", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 2, outputTokens: 100 });
    await refused(store, limit, ask("big", { requests: 3 }), T0, T0 + WINDOW_MS);
    await refused(store, limit, ask("long", { outputTokens: 101 }), T0, T0 + WINDOW_MS);
    await refused(store, { windowMs: 50, concurrent: 0 }, ask("none"), T0, T0 + 50);
    expect((await store.limiterView("L", T0)).waiting).toEqual([]);
    await granted(store, limit, ask("small", { outputTokens: 100 }), T0 + 1);
  });

  it("S30: limiters are independent of each other", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 1, concurrent: 1 });
    await granted(store, limit, ask("a"), T0);
    await refused(store, limit, ask("b"), T0, T0 + WINDOW_MS);
    const other = limitOf({ requests: 1 });
    expect(await store.reserve("M", other, ask("b"), T0)).toEqual({ granted: true });
    await store.blockLimiter("N", T0 + 500);
    expect(await store.reserve("M", other, ask("c"), T0 + WINDOW_MS)).toEqual({ granted: true });
    // S34: the names of the limiters with a grant or a waiter (a block alone is none).
    expect(await store.limiterNames()).toEqual(["L", "M"]);
    expect(await store.limiterView("M", T0 + WINDOW_MS)).toMatchObject({ requests: 1 });
    expect(await store.limiterView("L", T0)).toMatchObject({ requests: 1, inFlight: 1 });
    expect(await store.limiterView("nothing", T0)).toEqual({
      limiter: "nothing",
      requests: 0,
      inputTokens: 0,
      outputTokens: 0,
      inFlight: 0,
      waiting: [],
    });
  });
}

function inputTests(h: Harness): void {
  it("LR1: bad input is refused with InvalidInputError before anything is written", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 1 });
    const invalid = { code: "LOOM_INVALID_INPUT" };
    await expect(store.reserve("", limit, ask("a"), T0)).rejects.toMatchObject(invalid);
    await expect(store.reserve("L", { windowMs: 0 }, ask("a"), T0)).rejects.toMatchObject(invalid);
    await expect(store.reserve("L", limitOf({ requests: -1 }), ask("a"), T0)).rejects.toMatchObject(
      invalid,
    );
    await expect(
      store.reserve("L", limit, ask("a", { inputTokens: 1.5 }), T0),
    ).rejects.toMatchObject(invalid);
    await expect(store.reserve("L", limit, ask(""), T0)).rejects.toMatchObject(invalid);
    await expect(store.reserve("L", limit, ask("a"), Number.NaN)).rejects.toMatchObject(invalid);
    const used = { inputTokens: -1, outputTokens: 0 };
    await expect(store.settle("L", "a", used, T0)).rejects.toMatchObject(invalid);
    await expect(store.blockLimiter("L", Number.POSITIVE_INFINITY)).rejects.toMatchObject(invalid);
    expect(await store.limiterNames()).toEqual([]);
  });
}

function settleTests(h: Harness): void {
  it("S32: settling gives back the unused tokens and frees the call's concurrent slot", async () => {
    const store = await h.open();
    const limit = limitOf({ inputTokens: 100, concurrent: 1 });
    await granted(store, limit, ask("a", { inputTokens: 80 }), T0);
    // Both the tokens and the slot are in the way; the slot may free at any moment (LR4).
    await refused(store, limit, ask("b", { inputTokens: 40 }), T0 + 10, T0 + WINDOW_MS);
    await store.settle("L", "a", { inputTokens: 30, outputTokens: 7 }, T0 + 20);
    expect(await store.limiterView("L", T0 + 20)).toMatchObject({
      inputTokens: 30,
      outputTokens: 7,
      inFlight: 0,
    });
    await granted(store, limit, ask("b", { inputTokens: 40 }), T0 + 20);
    // S32: settling again, or an id never granted, changes nothing.
    await store.settle("L", "a", { inputTokens: 0, outputTokens: 0 }, T0 + 30);
    await store.settle("L", "nobody", { inputTokens: 5, outputTokens: 5 }, T0 + 30);
    await store.settle("other", "a", { inputTokens: 5, outputTokens: 5 }, T0 + 30);
    expect(await store.limiterView("L", T0 + 30)).toMatchObject({ inputTokens: 70, inFlight: 1 });
  });

  it("S30, S32: a grant counts as made when its call reaches the provider: sentByMs, moved back by the settle", async () => {
    const store = await h.open();
    const limit = limitOf({ outputTokens: 100 });
    await granted(store, limit, ask("a", { outputTokens: 100, sentByMs: T0 + 5_000 }), T0);
    // Not settled: counted until its sentByMs leaves the window, long after its grant did.
    const b = ask("b", { outputTokens: 1 });
    await refused(store, limit, b, T0 + 2 * WINDOW_MS, T0 + 5_000 + WINDOW_MS);
    // Settled at T0 + 2500: it reached the provider by then, and counts until a window after.
    await store.settle("L", "a", { inputTokens: 0, outputTokens: 100 }, T0 + 2_500);
    await refused(store, limit, b, T0 + 3_000, T0 + 2_500 + WINDOW_MS);
    await granted(store, limit, b, T0 + 2_500 + WINDOW_MS);
    // LR1: a call cannot have reached the provider before it was granted.
    await expect(store.reserve("L", limit, ask("c", { sentByMs: T0 }), T0 + 1)).rejects.toThrow(
      /sentByMs/,
    );
  });

  it("S32: a used amount above the reservation counts as used", async () => {
    const store = await h.open();
    const limit = limitOf({ tokens: 100 });
    await granted(store, limit, ask("a", { inputTokens: 10, outputTokens: 10 }), T0);
    await store.settle("L", "a", { inputTokens: 50, outputTokens: 45 }, T0 + 5);
    await refused(store, limit, ask("b", { inputTokens: 6 }), T0 + 10, T0 + WINDOW_MS);
    expect(await store.limiterView("L", T0 + 10)).toMatchObject({
      inputTokens: 50,
      outputTokens: 45,
    });
  });

  it("S30, LR4: concurrency is freed by a settle or when a hold ends; retryAtMs is the earlier of the hold's end and a step", async () => {
    const store = await h.open();
    const limit = limitOf({ concurrent: 2 });
    await granted(store, limit, ask("a", { holdUntilMs: T0 + 10 }), T0);
    await granted(store, limit, ask("b"), T0);
    await refused(store, limit, ask("c"), T0 + 1, T0 + 10);
    await granted(store, limit, ask("c"), T0 + 10);
    expect(await store.limiterView("L", T0 + 10)).toMatchObject({ inFlight: 2, requests: 3 });
    // b and c hold until LATER: a settle could come at any moment, so a step.
    await refused(store, limit, ask("d"), T0 + 20, T0 + 20 + LIMITER_STEP_MS);
    await store.settle("L", "c", { inputTokens: 0, outputTokens: 0 }, T0 + 30);
    await granted(store, limit, ask("d"), T0 + 30);
  });

  it("S33: a block grants nothing before its end, keeps the latest end, and shows in the view", async () => {
    const store = await h.open();
    const limit = limitOf({ requests: 1 });
    await store.blockLimiter("L", T0 + 500);
    await store.blockLimiter("L", T0 + 300);
    await refused(store, limit, ask("a"), T0, T0 + 500);
    expect(await store.limiterView("L", T0)).toMatchObject({
      requests: 0,
      blockedUntilMs: T0 + 500,
    });
    await granted(store, limit, ask("a"), T0 + 500);
    expect(await store.limiterView("L", T0 + 500)).not.toHaveProperty("blockedUntilMs");
    // A block and a full window: the later of the two.
    await store.blockLimiter("L", T0 + 700);
    await refused(store, limit, ask("b"), T0 + 600, T0 + 500 + WINDOW_MS);
    await store.blockLimiter("L", T0 + 2_000);
    await refused(store, limit, ask("b"), T0 + 601, T0 + 2_000);
    // A grant already made stays granted under a block (S30's same id).
    await granted(store, limit, ask("a"), T0 + 700);
  });
}
