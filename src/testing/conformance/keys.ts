/**
 * S19: key material is put once (the first put's material is the one every put returns), read,
 * listed by prefix in byte order, destroyed, and kept across a restart. S20: an ended log takes a
 * batch of SUBJECT_ERASED events only (the fence and sequence checks still apply); any other
 * batch it refuses.
 */
import { describe, expect, it } from "./vitest.ts";
import type { Envelope, ExecutionStatus } from "../../kernel/events.ts";
import type { AppendBatch, Store } from "../../store/spi.ts";
import {
  acquire,
  appendOne,
  batch,
  envelope,
  envelopes,
  expectAllOk,
  expectRefused,
  start,
  T0,
  TTL_MS,
  visible,
  type Harness,
} from "./helpers.ts";

/**
 * Ids whose byte order (UTF-8) differs from JavaScript's `<` (UTF-16): U+FFFF sorts before
 * U+10000 in bytes, after it in code units. The rest hold LIKE's `%` and `_`, which a prefix must
 * match as themselves.
 */
const UNDER_S = ["s:", "s:a", "s:a%", "s:a%b", "s:a_", "s:b", "s:é", "s:\uffff", "s:\u{10000}"];
const OTHERS = ["s", "s%a", "s_a", "sXa", "t:a", "r", "s;"];

/** A SUBJECT_ERASED fact as the runtime records it: kernel-stamped (E3). */
const erased = (id: string, seq: number, fence: number, subject = "subject-1"): Envelope => ({
  ...envelope(id, seq, "SUBJECT_ERASED", { subject }),
  meta: { kernel: true, fence },
});

/** Starts `id` and ends its log at sequence 2 with `status`; returns the fence. */
async function ended(store: Store, id: string, status: ExecutionStatus): Promise<number> {
  const fence = await start(store, id, { count: 2 });
  expectAllOk(await store.appendMany([batch(envelopes(id, 2, 1), fence, { status })]));
  return fence;
}

/** An erasure batch for an ended log: its status stays the one the log ended with. */
const erasure = (
  events: Envelope[],
  fence: number,
  status: ExecutionStatus,
  extra: Partial<AppendBatch> = {},
): AppendBatch => batch(events, fence, { status, ...extra });

export function keysSuite(h: Harness): void {
  describe("keys (S19)", () => {
    keyPutTests(h);
    keyListTests(h);
    keyDestroyTests(h);
  });

  describe("erasure after the end (S20)", () => {
    erasureAppendTests(h);
    erasureRefusalTests(h);
  });
}

/** S19: put if absent, and get. */
function keyPutTests(h: Harness): void {
  it("puts, gets, and returns the stored material when a key exists (put if absent)", async () => {
    const store = await h.open();
    expect(await store.getKey("k1")).toBeUndefined();
    expect(await store.putKey("k1", "material-1")).toBe("material-1");
    expect(await store.getKey("k1")).toBe("material-1");
    expect(await store.putKey("k1", "material-2")).toBe("material-1");
    expect(await store.getKey("k1")).toBe("material-1");
    // Opaque text, read back as put: any character, and long enough to be stored apart.
    const odd = `é \u{1F600} %_' "\\ ${"x".repeat(5000)}`;
    expect(await store.putKey("k2", odd)).toBe(odd);
    expect(await store.getKey("k2")).toBe(odd);
    expect(await store.getKey("k1")).toBe("material-1");
  });

  it("of concurrent puts of one id, every one returns the same stored material", async () => {
    const store = await h.open();
    const materials = Array.from({ length: 8 }, (_, i) => `material-${i}`);
    const returned = await Promise.all(materials.map((m) => store.putKey("k", m)));
    const stored = await store.getKey("k");
    expect(materials).toContain(stored);
    expect(returned).toEqual(materials.map(() => stored));
  });
}

/** S19: listed by prefix, in byte order. */
function keyListTests(h: Harness): void {
  it("lists the ids that start with a prefix, in byte order; % and _ are plain characters", async () => {
    const store = await h.open();
    const all = [...UNDER_S, ...OTHERS];
    // Put in an order that is neither sorted nor reversed: every fifth, round the list.
    for (let i = 0; i < all.length; i++) {
      const id = all[(i * 5) % all.length] as string;
      await store.putKey(id, `m:${id}`);
    }
    expect(await store.listKeys("s:")).toEqual(UNDER_S);
    expect(await store.listKeys("s%")).toEqual(["s%a"]);
    expect(await store.listKeys("s_")).toEqual(["s_a"]);
    expect(await store.listKeys("s:a%")).toEqual(["s:a%", "s:a%b"]);
    expect(await store.listKeys("s:a_")).toEqual(["s:a_"]);
    expect(await store.listKeys("s:\uffff")).toEqual(["s:\uffff"]);
    expect(await store.listKeys("S:")).toEqual([]);
    expect(await store.listKeys("nothing")).toEqual([]);
    expect(await store.listKeys("")).toEqual([
      "r",
      "s",
      "s%a",
      "s:",
      "s:a",
      "s:a%",
      "s:a%b",
      "s:a_",
      "s:b",
      "s:é",
      "s:\uffff",
      "s:\u{10000}",
      "s;",
      "sXa",
      "s_a",
      "t:a",
    ]);
  });

  it("lists by prefixes at the edges of the code space", async () => {
    const store = await h.open();
    // The last code point, and the last one before the surrogates: no next character follows
    // the first, and the one after the second is U+E000.
    const ids = ["p\u{10ffff}", "p\u{10ffff}x", "p\u{10ffff}\u{10ffff}", "q", "\ud7ffa", "\ue000"];
    for (const id of ids) await store.putKey(id, "m");
    expect(await store.listKeys("p\u{10ffff}")).toEqual([
      "p\u{10ffff}",
      "p\u{10ffff}x",
      "p\u{10ffff}\u{10ffff}",
    ]);
    expect(await store.listKeys("p\u{10ffff}\u{10ffff}")).toEqual(["p\u{10ffff}\u{10ffff}"]);
    expect(await store.listKeys("\ud7ff")).toEqual(["\ud7ffa"]);
    expect(await store.listKeys("\ue000")).toEqual(["\ue000"]);
  });
}

/** S19: destroyed, and kept across a restart. */
function keyDestroyTests(h: Harness): void {
  it("destroys a key: true if it existed, and it is gone from get and list; others stay", async () => {
    const store = await h.open();
    await store.putKey("subject:a", "secret-a");
    await store.putKey("subject:b", "secret-b");
    expect(await store.destroyKey("subject:a")).toEqual({ existed: true });
    expect(await store.getKey("subject:a")).toBeUndefined();
    expect(await store.listKeys("subject:")).toEqual(["subject:b"]);
    expect(await store.destroyKey("subject:a")).toEqual({ existed: false });
    expect(await store.destroyKey("never-put")).toEqual({ existed: false });
    expect(await store.getKey("subject:b")).toBe("secret-b");
    // Destroyed is absent: a new put stores its own material.
    expect(await store.putKey("subject:a", "secret-a2")).toBe("secret-a2");
    expect(await store.listKeys("subject:")).toEqual(["subject:a", "subject:b"]);
  });

  const reopen = h.reopen;
  if (reopen) {
    it("keys and destroys survive a restart (S5)", async () => {
      const first = await h.open();
      await first.putKey("k:1", "one");
      await first.putKey("k:2", "two");
      await first.putKey("k:3", "three");
      expect(await first.destroyKey("k:2")).toEqual({ existed: true });
      const store = await reopen(first);
      expect(await store.listKeys("k:")).toEqual(["k:1", "k:3"]);
      expect(await store.getKey("k:1")).toBe("one");
      expect(await store.getKey("k:2")).toBeUndefined();
      expect(await store.putKey("k:3", "other")).toBe("three");
    });
  }
}

/** S20: an ended log takes a batch of SUBJECT_ERASED, and nothing else of it changes. */
function erasureAppendTests(h: Harness): void {
  it("appends a batch of SUBJECT_ERASED only to an ended log, at its next sequence", async () => {
    const store = await h.open();
    const statuses: ExecutionStatus[] = ["completed", "failed", "cancelled", "continued"];
    for (const status of statuses) {
      const id = `x-${status}`;
      const fence = await ended(store, id, status);
      const facts = [erased(id, 3, fence)];
      expectAllOk(await store.appendMany([erasure(facts, fence, status)]));
      const two = [erased(id, 4, fence, "subject-2"), erased(id, 5, fence, "subject-3")];
      expectAllOk(await store.appendMany([erasure(two, fence, status)]));
      expect(await store.read(id, 3)).toEqual([...facts, ...two]);
      expect(await store.head(id)).toBe(5);
      const summary = (await store.list()).find((x) => x.executionId === id);
      expect(summary?.status).toBe(status);
      expect(summary?.head).toBe(5);
    }
  });

  it("an erasure leaves the lease, the timer rows and the wake rows others wrote as they were", async () => {
    const store = await h.open();
    const fence = await ended(store, "a", "completed");
    const fp = await start(store, "p");
    // A supervisor's wake row for "a" (S15), which an ended log keeps.
    const wake = { executionId: "a", timerId: "child:c", wakeAtMs: T0 + 5 };
    const wakes = { timersSet: [], timersCleared: [], clearAllTimers: false, wakes: [wake] };
    expectAllOk(await store.appendMany([batch(envelopes("p", 1, 1), fp, { index: wakes })]));
    const due = await store.dueTimers(Number.MAX_SAFE_INTEGER, 100);
    expect(due).toContainEqual(wake);
    const lease = await store.getLease("a");
    expectAllOk(await store.appendMany([erasure([erased("a", 3, fence)], fence, "completed")]));
    expect(await store.dueTimers(Number.MAX_SAFE_INTEGER, 100)).toEqual(due);
    expect(await store.getLease("a")).toEqual(lease);
    // Released with the batch, as the runtime's erasure does (S9).
    const released = erasure([erased("a", 4, fence)], fence, "completed", {
      releaseLease: "w1",
    });
    expectAllOk(await store.appendMany([released]));
    expect((await store.getLease("a"))?.owner).toBeUndefined();
  });
}

/** S20: any other batch an ended log refuses; the fence and sequence checks still apply. */
function erasureRefusalTests(h: Harness): void {
  it("an ended log still refuses any other batch, a mixed one, or one that moves its status", async () => {
    const store = await h.open();
    const fence = await ended(store, "a", "completed");
    const before = await visible(store, "a");
    const refused: AppendBatch[] = [
      erasure([envelope("a", 3, "STEP_STARTED")], fence, "completed"),
      erasure([erased("a", 3, fence), envelope("a", 4, "STEP_STARTED")], fence, "completed"),
      erasure([envelope("a", 3, "STEP_STARTED"), erased("a", 4, fence)], fence, "completed"),
      erasure([erased("a", 3, fence)], fence, "running"),
      erasure([erased("a", 3, fence)], fence, "failed"),
    ];
    for (const b of refused) expectRefused(await appendOne(store, b), "LOOM_EXECUTION_ENDED");
    expect(await visible(store, "a")).toEqual(before);
  });

  it("the fence and the sequence number are still checked (S2, S3)", async () => {
    const store = await h.open();
    const fence = await ended(store, "a", "completed");
    const before = await visible(store, "a");
    const stale = erasure([erased("a", 2, fence)], fence, "completed");
    expectRefused(await appendOne(store, stale), "LOOM_SEQUENCE_CONFLICT");
    const ahead = erasure([erased("a", 4, fence)], fence, "completed");
    expectRefused(await appendOne(store, ahead), "LOOM_SEQUENCE_CONFLICT");
    await store.releaseLease("a", "w1", fence);
    const taken = await acquire(store, "a", "w2", T0 + TTL_MS);
    const fenced = erasure([erased("a", 3, fence)], fence, "completed");
    expectRefused(await appendOne(store, fenced), "LOOM_FENCED");
    expect(await visible(store, "a")).toEqual(before);
    const now = erasure([erased("a", 3, taken.fence)], taken.fence, "completed");
    expectAllOk(await store.appendMany([now]));
    expect(await store.head("a")).toBe(3);
  });

  it("in a group commit, each batch is judged on its own (S4)", async () => {
    const store = await h.open();
    const fa = await ended(store, "a", "completed");
    const fb = await ended(store, "b", "cancelled");
    const fc = await start(store, "c");
    const outcomes = await store.appendMany([
      erasure([erased("a", 3, fa)], fa, "completed"),
      batch(envelopes("c", 1, 1), fc),
      erasure([envelope("b", 3, "STEP_STARTED")], fb, "cancelled"),
      erasure([erased("b", 3, fb)], fb, "cancelled"),
      erasure([envelope("a", 4, "STEP_STARTED")], fa, "completed"),
      erasure([erased("a", 4, fa)], fa, "completed"),
      // On a log that has not ended an erasure is an append like any other.
      batch([erased("c", 2, fc)], fc),
    ]);
    expect(outcomes.map((o) => (o.ok ? "ok" : o.error.code))).toEqual([
      "ok",
      "ok",
      "LOOM_EXECUTION_ENDED",
      "ok",
      "LOOM_EXECUTION_ENDED",
      "ok",
      "ok",
    ]);
    expect([await store.head("a"), await store.head("b"), await store.head("c")]).toEqual([
      4, 3, 2,
    ]);
    const listed = await store.list();
    expect(listed.map((x) => [x.executionId, x.status])).toEqual([
      ["a", "completed"],
      ["b", "cancelled"],
      ["c", "running"],
    ]);
  });
}
