/**
 * S18 of the fleet conformance suite (fleet.ts): wakes. Every listener hears what became
 * runnable, a notice, a message and a timer's time, in commit order; nothing is heard for what a
 * held lease, a refused batch or a rolled-back commit did, nor by a listener that stopped.
 */
import { expect, it } from "./vitest.ts";
import { indexChanges } from "../../fold/index-changes.ts";
import {
  acquire,
  batch,
  envelope,
  envelopes,
  expectAllOk,
  expectRefused,
  FLOW,
  start,
  T0,
  TTL_MS,
} from "./helpers.ts";
import { ear, type FleetHarness } from "./fleet-helpers.ts";

/** S18: a pending execution no one holds, and a running one whose lease is released. */
export function runnableWakeTests(f: FleetHarness): void {
  it("a new pending execution with no lease held is runnable, heard by every listener", async () => {
    const { store, peer } = await f.pair();
    const [here, there] = [await ear(store), await ear(peer)];
    const claimLease = { owner: "starter", expiresAtMs: T0 + TTL_MS };
    const first = batch(envelopes("p", 0, 1), 1, {
      status: "pending",
      claimLease,
      releaseLease: "starter",
    });
    expectAllOk(await peer.appendMany([first]));
    const wake = { kind: "runnable", executionId: "p" };
    expect(await here.hear((w) => w.kind === "runnable", "runnable")).toEqual(wake);
    expect(await there.hear((w) => w.kind === "runnable", "runnable")).toEqual(wake);
  });

  it("a lease released while running is runnable; a parked one's, or a held one, is not", async () => {
    const { store, peer } = await f.pair();
    const ears = await ear(store);
    const fr = await start(peer, "r", { status: "running" });
    const fp = await start(peer, "q", { status: "parked" });
    await peer.releaseLease("q", "w1", fp);
    await peer.releaseLease("r", "someone-else", fr);
    expect(await ears.settle(peer)).toEqual([]);
    await peer.releaseLease("r", "w1", fr);
    expect(await ears.settle(peer)).toEqual([{ kind: "runnable", executionId: "r" }]);
  });
}

/** S18: each wake names what it is for: a notice's owner, a message's chain, a timer's time. */
export function namedWakeTests(f: FleetHarness): void {
  it("a notice names its owner and execution", async () => {
    const { store, peer } = await f.pair();
    const ears = await ear(store);
    const fence = await start(peer, "a", { owner: "w1" });
    const notice = { owner: "w2", kind: "cancel" as const };
    expectAllOk(await peer.appendMany([batch(envelopes("a", 1, 1), fence, { notice })]));
    expect(await ears.hear((w) => w.kind === "notice", "notice")).toEqual({
      kind: "notice",
      owner: "w2",
      executionId: "a",
    });
  });

  it("a message names its chain", async () => {
    const { store, peer } = await f.pair();
    const ears = await ear(store);
    await peer.appendMessage("chain-1", { topic: "t", key: "k", payload: { n: 1 }, atMs: T0 });
    expect(await ears.hear((w) => w.kind === "message", "message")).toEqual({
      kind: "message",
      chainId: "chain-1",
    });
  });

  it("a timer row written, a wake row for another execution, a timer deferred: each its time", async () => {
    const { store, peer } = await f.pair();
    const fence = await start(peer, "a");
    const ears = await ear(store);
    const sleep = envelope("a", 1, "TIMER_SCHEDULED", {
      callId: "t1",
      scope: "",
      name: "sleep",
      wakeAtMs: T0 + 500,
    });
    const index = indexChanges([sleep]);
    expect(index?.timersSet).toEqual([{ timerId: "t1", wakeAtMs: T0 + 500 }]);
    const wakes = [{ executionId: "b", timerId: "child:a", wakeAtMs: T0 + 7 }];
    const withWake = index && { ...index, wakes };
    expectAllOk(
      await peer.appendMany([batch([sleep], fence, { status: "parked", index: withWake })]),
    );
    await peer.deferTimer("a", "t1", T0 + 900);
    await peer.deferTimer("a", "gone", T0 + 1);
    const heard = await ears.settle(peer);
    expect(heard).toHaveLength(3);
    expect(heard).toEqual(
      expect.arrayContaining([
        { kind: "timer", executionId: "a", wakeAtMs: T0 + 500 },
        { kind: "timer", executionId: "b", wakeAtMs: T0 + 7 },
      ]),
    );
    expect(heard[2]).toEqual({ kind: "timer", executionId: "a", wakeAtMs: T0 + 900 });
  });
}

/** S18: no wake for what makes nothing runnable, and none for a listener that stopped. */
export function quietWakeTests(f: FleetHarness): void {
  it("nothing for an append under a held lease, a refused batch or a rolled-back commit", async () => {
    let failing = false;
    const { store, peer } = await f.pair({
      beforeCommit: () => {
        if (failing) throw new Error("injected crash before commit");
      },
    });
    const ears = await ear(peer);
    const fence = await start(store, "a", { owner: "w1" });
    const { fence: fb } = await acquire(store, "b", "w1");
    const sleep = envelope("a", 2, "TIMER_SCHEDULED", {
      callId: "t1",
      scope: "",
      name: "sleep",
      wakeAtMs: T0 + 500,
    });
    const loud = (events: ReturnType<typeof envelopes>, f: number) =>
      batch(events, f, {
        status: "pending",
        releaseLease: "w1",
        notice: { owner: "w2", kind: "cancel" },
        index: indexChanges(events),
      });
    // A step appended under a lease still held wakes nobody.
    expectAllOk(await store.appendMany([batch(envelopes("a", 1, 1), fence)]));
    const [stale] = await store.appendMany([loud([sleep], fence + 1)]);
    expectRefused(stale, "LOOM_FENCED");
    failing = true;
    await expect(
      store.appendMany([loud([sleep], fence), loud(envelopes("b", 0, 1), fb)]),
    ).rejects.toThrow("injected crash before commit");
    failing = false;
    await store.releaseLease("a", "w1", fence + 1);
    expect(await ears.settle(store)).toEqual([]);
  });

  it("an unsubscribed listener hears nothing more; the others still do", async () => {
    const { store, peer } = await f.pair();
    const gone = await ear(store);
    const stays = await ear(store);
    await gone.stop();
    await gone.stop();
    await peer.appendMessage("c", { topic: "t", key: "k", payload: null, atMs: T0 });
    await stays.hear((w) => w.kind === "message" && w.chainId === "c", "for c");
    expect(await stays.settle(peer)).toEqual([{ kind: "message", chainId: "c" }]);
    expect(gone.wakes).toEqual([]);
    await stays.stop();
    // With no one left listening, a new subscription listens again.
    const again = await ear(store);
    expect(await again.settle(peer)).toEqual([]);
  });
}

/** S18, S26: a queue's admitters hear what may let it admit. */
export function queueWakeTests(f: FleetHarness): void {
  it("a queued execution recorded, one ended or one letting its lease go wakes its queue", async () => {
    const { store, peer } = await f.pair();
    const ears = await ear(store);
    const queue = { name: "qa", priority: 0 };
    const record = (id: string) =>
      batch([envelope(id, 0)], 1, {
        status: "queued",
        queue,
        claimLease: { owner: "recorder", expiresAtMs: T0 + TTL_MS },
        releaseLease: "recorder",
      });
    const woke = [{ kind: "queue", queue: "qa" }];
    expectAllOk(await peer.appendMany([record("q1")]));
    expect(await ears.settle(peer)).toEqual(woke);
    const admit = { queue: "qa", limits: {}, flows: [FLOW], limit: 1, ttlMs: TTL_MS, nowMs: T0 };
    const [a1] = await peer.admitQueued("w1", admit);
    const admitted = envelope("q1", 1, "EXECUTION_ADMITTED");
    expectAllOk(await peer.appendMany([batch([admitted], a1?.fence ?? 0)]));
    // Admitted and running, a plain execution started: nothing for the queue.
    await start(peer, "plain");
    expect(await ears.settle(peer)).toEqual([]);
    const end = envelope("q1", 2, "EXECUTION_COMPLETED");
    const ended = { status: "completed" as const, releaseLease: "w1" };
    expectAllOk(await peer.appendMany([batch([end], a1?.fence ?? 0, ended)]));
    expect(await ears.settle(peer)).toEqual(woke);
    expectAllOk(await peer.appendMany([record("q2")]));
    const [a2] = await peer.admitQueued("w1", admit);
    expect(await ears.settle(peer)).toEqual(woke);
    await peer.releaseLease("q2", "w1", a2?.fence ?? 0);
    expect(await ears.settle(peer)).toEqual(woke);
    const cancel = envelope("q2", 1, "EXECUTION_CANCELLED");
    expectAllOk(await peer.appendMany([batch([cancel], a2?.fence ?? 0, { status: "cancelled" })]));
    expect(await ears.settle(peer)).toEqual(woke);
  });
}
