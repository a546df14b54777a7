/**
 * Issue 22's first finding, as the exploit, on a real store: someone who can write the store's
 * `snapshots` table (and nothing else: no audit key, no codec key) forges the snapshot of a parked
 * payout so that the review the log refused reads as approved. The next replay must not pay, and
 * `verifyLog` must name the snapshot (trust/sealed-snapshots.ts B1..B5, trust/verify.ts K6).
 *
 * `snapshotForgerySuite` runs against any backend that can open a store over the same data again
 * and read and write the snapshot row behind the store's back.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  isLoomError,
  type ExecutionState,
  type Json,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../../src/index.ts";
import { until } from "../helpers.ts";

export interface SnapshotRow {
  seq: number;
  state: string;
}

export interface SnapshotBackend {
  name: string;
  /** A store over this test's data (the same data every call within a test). */
  open(): Promise<Store>;
  /** The snapshot row of `id` as stored, behind the store's back. */
  snapshotRow(id: string): Promise<SnapshotRow | undefined>;
  /** Writes (inserts or replaces) the snapshot row of `id`, behind the store's back. */
  setSnapshotRow(id: string, row: SnapshotRow): Promise<void>;
  /** A new, empty data set for the next test. */
  reset(): Promise<void>;
}

/** What the payout step paid, by execution id: the harm the forgery aims at. */
const paid: string[] = [];

/** A payout: reviewed (over 100 is refused), then held for a confirmation, then paid if approved. */
const payout = flow$("payout", async (ctx, input: { amount: number; to: string }) => {
  const approved = await ctx.run("review", () => input.amount <= 100);
  await ctx.suspend({ timeout: 60_000 });
  if (!approved) return "refused";
  await ctx.run("pay", () => {
    paid.push(`${input.to}:${input.amount}`);
    return input.amount;
  });
  return "paid";
});

/** A step result whose JSON text a careless round trip would change (B1: the MAC is over text). */
const odd = flow$("odd", async (ctx) => {
  const value = await ctx.run(
    "odd",
    () =>
      JSON.parse(
        '{"b":1,"10":2,"2":3,"__proto__":{"x":[1,{"9":0,"a":1}]},"s":"\\u2028\\ud800é","n":1e21,"f":-0.5}',
      ) as Json,
  );
  await ctx.suspend({ timeout: 60_000 });
  return value;
});

/**
 * `state` with its recorded review turned into an approval (what the forger writes), wherever the
 * state keeps it: its frame, or (schema 1.13.0) its value alone (fold/settled.ts L1).
 */
function approved(state: ExecutionState): ExecutionState {
  const forged = structuredClone(state);
  const lean = forged._settled?.step;
  if (lean && Object.hasOwn(lean, "review#0")) {
    if (lean["review#0"] !== false) throw new Error("the review is not a refusal");
    lean["review#0"] = true;
    return forged;
  }
  const review = Object.values(forged.frames).find((f) => f.name === "review");
  if (!review || review.output !== false) throw new Error("the review frame is not a refusal");
  review.output = true;
  return forged;
}

/** The state inside a stored snapshot, wherever the store's wrapping keeps it. */
function withStateReplaced(text: string, forged: ExecutionState): string {
  const stored = JSON.parse(text) as Record<string, unknown>;
  // A bound snapshot keeps the state under `state` beside its binding; the forger keeps the
  // binding as it is (it cannot recompute a keyed MAC) and swaps the state.
  if ("state" in stored && typeof stored.state === "object") {
    return JSON.stringify({ ...stored, state: forged });
  }
  return JSON.stringify(forged);
}

export function snapshotForgerySuite(backend: SnapshotBackend): void {
  describe(`forged snapshots on ${backend.name}`, () => {
    const open: Runtime[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((r) => r.close()));
      await backend.reset();
      paid.length = 0;
    });
    async function runtime(opts: Partial<RuntimeOptions> = {}): Promise<Runtime> {
      const r = createRuntime({ store: await backend.open(), pollIntervalMs: 20, ...opts });
      open.push(r);
      r.registerFlow(payout).registerFlow(odd);
      return r;
    }
    /** A payout of `amount`, reviewed and parked, in a runtime that is then closed. */
    async function parkedPayout(
      id: string,
      amount: number,
      opts: Partial<RuntimeOptions>,
    ): Promise<ExecutionState> {
      const r = await runtime(opts);
      await r.start("payout", { amount, to: "mallory" }, { id });
      await until(async () => (await r.getState(id)).status === "parked");
      const state = await r.getState(id);
      await r.close();
      return state;
    }

    it("B2, K6: a snapshot row inserted with a keyed audit (no codec) is ignored: the refused payout is not paid, and verifyLog names it", async () => {
      const audit = { key: "audit-key" };
      const state = await parkedPayout("p", 500, { audit });
      // The forger writes a snapshot of the parked state with the review approved.
      await backend.setSnapshotRow("p", { seq: state.seq, state: JSON.stringify(approved(state)) });
      const problems: Error[] = [];
      const r = await runtime({ audit, onError: (e) => problems.push(e) });
      await r.resume("p", "confirmed");
      expect((await r.waitForCompletion("p")).output).toBe("refused");
      expect(paid).toEqual([]);
      expect(problems.some((e) => isLoomError(e, "LOOM_SNAPSHOT_REJECTED"))).toBe(true);
      expect(await r.verifyLog("p")).toMatchObject({
        ok: false,
        firstBadSeq: state.seq,
        problem: "snapshot",
        snapshot: { seq: state.seq, verified: false },
      });
    });

    it("B2, K6: a saved snapshot whose state is swapped under its binding is ignored, with a keyed or an unkeyed audit", async () => {
      for (const audit of [{ key: "audit-key" }, true] as const) {
        const id = audit === true ? "plain" : "keyed";
        const state = await parkedPayout(id, 500, { audit });
        const r = await runtime({ audit });
        await r.store.saveSnapshot(id, { seq: state.seq, state });
        await r.close();
        const row = (await backend.snapshotRow(id)) as SnapshotRow;
        await backend.setSnapshotRow(id, {
          seq: row.seq,
          state: withStateReplaced(row.state, approved(state)),
        });
        const fresh = await runtime({ audit, onError: () => undefined });
        await fresh.resume(id, "confirmed");
        expect((await fresh.waitForCompletion(id)).output).toBe("refused");
        expect(await fresh.verifyLog(id)).toMatchObject({ ok: false, problem: "snapshot" });
      }
      expect(paid).toEqual([]);
    });

    it("B4, P1: a compacted log's snapshot verifies and drives the replay; forged, the replay is refused rather than folded short", async () => {
      const audit = { key: "audit-key" };
      await parkedPayout("good", 50, { audit });
      const bad = await parkedPayout("bad", 500, { audit });
      const r = await runtime({ audit });
      for (const id of ["good", "bad"]) {
        expect((await r.compact(id, { snapshotFirst: true })).removed).toBeGreaterThan(0);
      }
      await r.close();
      const row = (await backend.snapshotRow("bad")) as SnapshotRow;
      await backend.setSnapshotRow("bad", {
        seq: row.seq,
        state: withStateReplaced(row.state, approved(bad)),
      });
      const fresh = await runtime({ audit, onError: () => undefined });
      await fresh.resume("good", "confirmed");
      expect((await fresh.waitForCompletion("good")).output).toBe("paid");
      const refused = await fresh.resume("bad", "confirmed").catch((e: unknown) => e);
      expect(isLoomError(refused, "LOOM_LOG_CORRUPT")).toBe(true);
      expect(paid).toEqual(["mallory:50"]);
      expect(await fresh.verifyLog("bad")).toMatchObject({
        ok: false,
        firstBadSeq: row.seq,
        problem: "snapshot",
      });
      expect(await fresh.verifyLog("good")).toMatchObject({
        ok: true,
        compactedThrough: row.seq - 1,
        snapshot: { verified: true },
      });
    });

    it("B1, B4: snapshots saved by a run's batches verify, also after a compaction deleted the event they fold up to", async () => {
      const audit = { key: "audit-key" };
      const r = await runtime({ audit, snapshotEvery: 2 });
      // A memo in the input makes the state outweigh the batches after its first snapshot, so
      // none rides the last batch (run-appends.ts: a snapshot waits for as many bytes appended
      // as the last one had) and the compaction below deletes the event the snapshot folds to.
      const memo = "m".repeat(1000);
      await r.start("payout", { amount: 50, to: "alice", memo }, { id: "p" });
      await until(async () => (await r.getState("p")).status === "parked");
      await r.resume("p", "confirmed");
      expect((await r.waitForCompletion("p")).output).toBe("paid");
      const row = (await backend.snapshotRow("p")) as SnapshotRow;
      const head = (await r.readLog("p")).length - 1;
      expect(row.seq).toBeLessThan(head);
      expect(await r.verifyLog("p")).toMatchObject({ ok: true, snapshot: { verified: true } });
      await r.compact("p");
      const log = await r.readLog("p");
      expect(log.some((e) => e.seq === row.seq)).toBe(false);
      const fresh = await runtime({ audit });
      expect(await fresh.verifyLog("p")).toMatchObject({ ok: true, snapshot: { verified: true } });
      expect((await fresh.getState("p")).output).toBe("paid");
    });

    it("B1: a state whose text has integer-like keys, own __proto__ keys and lone surrogates verifies after the store's round trip", async () => {
      const audit = { key: "audit-key" };
      const r = await runtime({ audit, snapshotEvery: 1 });
      await r.start("odd", null, { id: "odd" });
      await until(async () => (await r.getState("odd")).status === "parked");
      const plain = await r.getState("odd");
      await r.compact("odd", { snapshotFirst: true });
      await r.close();
      const problems: Error[] = [];
      const fresh = await runtime({ audit, onError: (e) => problems.push(e) });
      expect(await fresh.verifyLog("odd")).toMatchObject({
        ok: true,
        snapshot: { verified: true },
      });
      expect(await fresh.getState("odd")).toEqual(plain);
      await fresh.resume("odd", "go");
      const output = (await fresh.waitForCompletion("odd")).output as Record<string, unknown>;
      expect(Object.getOwnPropertyDescriptor(output, "__proto__")?.value).toEqual({
        x: [1, { 9: 0, a: 1 }],
      });
      expect(problems).toEqual([]);
    });

    it("B5: turning the audit on keeps a log compacted without it readable: its snapshot has no hash to bind to", async () => {
      await parkedPayout("p", 50, {});
      const plain = await runtime();
      expect((await plain.compact("p", { snapshotFirst: true })).removed).toBeGreaterThan(0);
      await plain.close();
      const problems: Error[] = [];
      const r = await runtime({ audit: { key: "audit-key" }, onError: (e) => problems.push(e) });
      await r.resume("p", "confirmed");
      expect((await r.waitForCompletion("p")).output).toBe("paid");
      expect(problems).toEqual([]);
      expect(await r.verifyLog("p")).toMatchObject({
        ok: false,
        firstBadSeq: 0,
        problem: "unhashed",
      });
    });

    it("B5: with no audit at all, a saved snapshot is used as before (there is nothing to bind it to)", async () => {
      const state = await parkedPayout("p", 500, {});
      const r = await runtime();
      await r.store.saveSnapshot("p", { seq: state.seq, state });
      expect(JSON.parse(((await backend.snapshotRow("p")) as SnapshotRow).state)).toEqual(state);
      await r.resume("p", "confirmed");
      expect((await r.waitForCompletion("p")).output).toBe("refused");
    });
  });
}
