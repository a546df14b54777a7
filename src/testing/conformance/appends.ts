/**
 * S1, S2, S4: batches are appended whole, at the expected sequence number only, and a group
 * commit settles each execution's batch on its own. E4: nothing is appended after a terminal
 * status.
 */
import { describe, expect, it } from "./vitest.ts";
import type { Envelope } from "../../kernel/events.ts";
import type { AppendOutcome } from "../../store/spi.ts";
import {
  acquire,
  appendOne,
  batch,
  envelope,
  envelopes,
  expectAllOk,
  expectRefused,
  start,
  visible,
  type Harness,
} from "./helpers.ts";

export function appendSuite(h: Harness): void {
  describe("appends (S1, S2, S4)", () => {
    readBackTests(h);
    sequenceTests(h);
    groupCommitTests(h);
  });
}

/** S1: a batch reads back as appended, and no caller's object aliases the log. */
function readBackTests(h: Harness): void {
  it("S1: reads back a batch as appended, from any sequence", async () => {
    const store = await h.open();
    expect(await store.head("a")).toBe(-1);
    expect(await store.read("a")).toEqual([]);
    const { fence } = await acquire(store, "a");
    const first = envelopes("a", 0, 3);
    expectAllOk(await store.appendMany([batch(first, fence)]));
    expect(await store.read("a")).toEqual(first);
    expect(await store.head("a")).toBe(2);
    const second = envelopes("a", 3, 2);
    expectAllOk(await store.appendMany([batch(second, fence)]));
    expect(await store.read("a")).toEqual([...first, ...second]);
    expect(await store.read("a", 2)).toEqual([...first, ...second].slice(2));
    expect(await store.read("a", 5)).toEqual([]);
    // A limit bounds how many are read (routing reads only a sequence 0).
    expect(await store.read("a", 0, 1)).toEqual(first.slice(0, 1));
    expect(await store.read("a", 1, 2)).toEqual([...first, ...second].slice(1, 3));
    expect(await store.read("a", 0, 0)).toEqual([]);
    expect(await store.head("a")).toBe(4);
    expect(await store.read("b")).toEqual([]);
  });

  it("S1: what a caller mutates after appending or reading does not change the log", async () => {
    const store = await h.open();
    const { fence } = await acquire(store, "a");
    const events = envelopes("a", 0, 2);
    const expected = structuredClone(events);
    expectAllOk(await store.appendMany([batch(events, fence)]));
    (events[0] as Envelope).payload = "changed";
    const read = await store.read("a");
    (read[1] as Envelope).kind = "STEP_FAILED";
    expect(await store.read("a")).toEqual(expected);
  });
}

/** S2: one sequence number, one winner; E4 and malformed batches are refused whole. */
function sequenceTests(h: Harness): void {
  it("S2: of concurrent appends at one sequence number exactly one wins", async () => {
    const store = await h.open();
    const { fence } = await acquire(store, "a");
    const writers = 5;
    const winners: Envelope[] = [];
    for (let seq = 0; seq < 4; seq++) {
      const attempts = Array.from({ length: writers }, (_, w) => [
        envelope("a", seq, undefined, { writer: w, seq }),
      ]);
      const results = await Promise.all(
        attempts.map((events) => store.appendMany([batch(events, fence)])),
      );
      const outcomes = results.map((r) => r[0] as AppendOutcome);
      const won = outcomes.flatMap((o, w) => (o.ok ? [w] : []));
      expect(won).toHaveLength(1);
      outcomes.filter((o) => !o.ok).forEach((o) => expectRefused(o, "LOOM_SEQUENCE_CONFLICT"));
      winners.push(...(attempts[won[0] ?? -1] ?? []));
    }
    const log = await store.read("a");
    expect(log.map((e) => e.seq)).toEqual([0, 1, 2, 3]);
    expect(log).toEqual(winners);
    expect(await store.head("a")).toBe(3);
  });

  it("S2: refuses a batch behind or ahead of the log's next sequence, writing nothing", async () => {
    const store = await h.open();
    const fence = await start(store, "a", { count: 3 });
    const before = await visible(store, "a");
    expectRefused(
      await appendOne(store, batch(envelopes("a", 1, 2), fence)),
      "LOOM_SEQUENCE_CONFLICT",
    );
    expectRefused(
      await appendOne(store, batch(envelopes("a", 4, 1), fence)),
      "LOOM_SEQUENCE_CONFLICT",
    );
    expectRefused(
      await appendOne(store, batch(envelopes("a", 0, 1), fence)),
      "LOOM_SEQUENCE_CONFLICT",
    );
    expect(await visible(store, "a")).toEqual(before);
  });

  it("E4: refuses any append once the log ended, writing nothing", async () => {
    const store = await h.open();
    const fence = await start(store, "a", { count: 2 });
    expectAllOk(
      await store.appendMany([batch(envelopes("a", 2, 1), fence, { status: "completed" })]),
    );
    const before = await visible(store, "a");
    expectRefused(
      await appendOne(store, batch(envelopes("a", 3, 1), fence)),
      "LOOM_EXECUTION_ENDED",
    );
    expect(await visible(store, "a")).toEqual(before);
  });

  it("refuses a batch that is empty or not dense from expectedSeq (LOOM_INVALID_INPUT)", async () => {
    const store = await h.open();
    const fence = await start(store, "a", { count: 2 });
    const before = await visible(store, "a");
    const gap = [envelope("a", 2), envelope("a", 4)];
    const shifted = envelopes("a", 3, 2);
    const foreign = [envelope("a", 2), envelope("b", 3)];
    const bad = [
      batch(gap, fence),
      { ...batch(shifted, fence), expectedSeq: 2 },
      batch(foreign, fence),
      { ...batch([], fence), executionId: "a", expectedSeq: 2 },
    ];
    for (const b of bad) expectRefused(await appendOne(store, b), "LOOM_INVALID_INPUT");
    expect(await visible(store, "a")).toEqual(before);
    expect(await store.head("b")).toBe(-1);
  });
}

/** S4: a group commit settles each execution's batch on its own. */
function groupCommitTests(h: Harness): void {
  it("S4: commits each execution's batch on its own; a fenced one writes nothing", async () => {
    const store = await h.open();
    const fa = await start(store, "a");
    const fb = await start(store, "b");
    const fc = await start(store, "c");
    const taken = await store.acquireLease("c", "w2", {
      ttlMs: 1000,
      nowMs: 0,
      takeoverFence: fc,
    });
    expect(taken?.fence).toBe(fc + 1);
    const beforeC = await visible(store, "c");
    const { fence: fd } = await acquire(store, "d");
    const outcomes = await store.appendMany([
      batch(envelopes("a", 1, 2), fa, { status: "parked" }),
      batch(envelopes("c", 1, 2), fc),
      batch(envelopes("b", 1, 1), fb),
      batch(envelopes("d", 0, 1), fd),
      batch(envelopes("e", 0, 1), 1),
    ]);
    expect(outcomes).toHaveLength(5);
    expect(outcomes[0]?.ok).toBe(true);
    expectRefused(outcomes[1], "LOOM_FENCED");
    expect(outcomes[2]?.ok).toBe(true);
    expect(outcomes[3]?.ok).toBe(true);
    expectRefused(outcomes[4], "LOOM_FENCED");
    expect(await store.head("a")).toBe(2);
    expect(await store.head("b")).toBe(1);
    expect(await store.read("d")).toEqual(envelopes("d", 0, 1));
    expect(await visible(store, "c")).toEqual(beforeC);
    expect(await store.head("e")).toBe(-1);
    const listed = await store.list();
    expect(listed.map((x) => x.executionId)).toEqual(["a", "b", "c", "d"]);
    expect(listed[0]?.status).toBe("parked");
  });

  it("S4: batches for one execution in one call apply in order, each on its own", async () => {
    const store = await h.open();
    const fence = await start(store, "a");
    const outcomes = await store.appendMany([
      batch(envelopes("a", 1, 2), fence),
      batch(envelopes("a", 1, 1), fence),
      batch(envelopes("a", 3, 1), fence, { status: "completed" }),
    ]);
    expect(outcomes[0]?.ok).toBe(true);
    expectRefused(outcomes[1], "LOOM_SEQUENCE_CONFLICT");
    expect(outcomes[2]?.ok).toBe(true);
    expect(await store.read("a")).toEqual(envelopes("a", 0, 4));
    expect((await store.list())[0]).toMatchObject({ head: 3, status: "completed" });
  });
}
