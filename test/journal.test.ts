import { describe, expect, it } from "vitest";
import { memoryStore, type AppendBatch, type Store } from "../src/index.ts";
import { Journal } from "../src/runtime/journal.ts";

/** A memory store whose commits take `ms`, as a networked store's do. */
function slowStore(ms: number): Store {
  const inner = memoryStore();
  return {
    ...inner,
    appendMany: async (batches: readonly AppendBatch[]) => {
      await new Promise((r) => setTimeout(r, ms));
      return inner.appendMany(batches);
    },
  };
}

describe("Journal", () => {
  it("J2: appends queued in one turn share one commit", async () => {
    const store = memoryStore();
    const journal = new Journal(store);
    for (const id of ["a", "b", "c"]) await store.acquireLease(id, "w", { ttlMs: 1e9, nowMs: 0 });
    const batch = (id: string): AppendBatch => ({
      executionId: id,
      events: [{ executionId: id, seq: 0, kind: "EXECUTION_STARTED", at: 0, payload: {} }],
      expectedSeq: 0,
      fence: 1,
      status: "pending",
      flow: "f",
    });
    await Promise.all(["a", "b", "c"].map((id) => journal.append(batch(id))));
    expect(journal.commits).toBe(1);
  });

  it("a writer registered while a commit is in flight gets a commit of its own (R9)", async () => {
    const journal = new Journal(slowStore(30));
    const first = journal
      .append({
        executionId: "a",
        events: [{ executionId: "a", seq: 0, kind: "EXECUTION_STARTED", at: 0, payload: {} }],
        expectedSeq: 0,
        fence: 1,
        status: "pending",
      })
      .catch(() => undefined);
    await new Promise((r) => setTimeout(r, 10));
    let wrote = false;
    journal.atNextFlush(() => (wrote = true));
    await first;
    await journal.drain();
    expect(wrote).toBe(true);
  });

  it("J1: an append a writer makes during a flush joins it: one commit at a time, and drain waits", async () => {
    const inner = memoryStore();
    await inner.acquireLease("a", "w", { ttlMs: 1e9, nowMs: 0 });
    let inFlight = 0;
    let most = 0;
    const calls: number[] = [];
    const store: Store = {
      ...inner,
      appendMany: async (batches: readonly AppendBatch[]) => {
        calls.push(batches.length);
        most = Math.max(most, ++inFlight);
        await new Promise((r) => setTimeout(r, 20));
        inFlight--;
        return inner.appendMany(batches);
      },
    };
    const journal = new Journal(store);
    const event = (seq: number) => ({
      executionId: "a",
      seq,
      kind: seq === 0 ? ("EXECUTION_STARTED" as const) : ("STEP_STARTED" as const),
      at: 0,
      payload: {},
    });
    const batch = (seq: number): AppendBatch => ({
      executionId: "a",
      events: [event(seq)],
      expectedSeq: seq,
      fence: 1,
      status: "running",
      flow: "f",
    });
    let second: Promise<void> | undefined;
    journal.atNextFlush(() => {
      second = journal.append(batch(1));
    });
    const first = journal.append(batch(0));
    await journal.drain();
    expect(await inner.head("a")).toBe(1);
    await Promise.all([first, second]);
    expect(most).toBe(1);
    expect(calls.every((n) => n > 0)).toBe(true);
  });
});
