/**
 * The PostgreSQL append's fast path (append-fast.ts F1..F5): a step, an end or a start is one
 * plain statement, and what it does not take goes to the routine. The races hunt its invariants
 * with several stores (a fleet's processes) on one schema: of concurrent appends at one sequence
 * number exactly one wins (S2, F2), of concurrent starts of one id exactly one creates it (F3),
 * and an append under a fence that a takeover moved meanwhile is either refused or seen by the
 * new owner's first read (S3, F2).
 */
import pg from "pg";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { Json } from "../src/kernel/json.ts";
import type { AppendBatch, AppendOutcome } from "../src/store/spi.ts";
import { postgresStore, type PostgresStore } from "../src/store/postgres/index.ts";
import { APPEND_ROUTINE, APPEND_ROUTINE_ARGS } from "../src/store/postgres/append-routine.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const url = pgUrl();
const schemas: string[] = [];
afterAll(() => dropSchema(url, ...schemas));

/** `n` stores on one fresh schema, as `n` processes of a fleet would open it. */
async function fleet(n: number): Promise<PostgresStore[]> {
  const schema = schemaName("fast");
  schemas.push(schema);
  const first = await postgresStore({ connectionString: url, schema, pool: { max: 2 } });
  const rest = await Promise.all(
    Array.from({ length: n - 1 }, () =>
      postgresStore({ connectionString: url, schema, pool: { max: 2 } }),
    ),
  );
  return [first, ...rest];
}

const closeAll = (stores: PostgresStore[]) => Promise.all(stores.map((s) => s.close()));

const started = (id: string, owner = "w", payload: Json = { n: 0 }): AppendBatch => ({
  executionId: id,
  events: [{ executionId: id, seq: 0, kind: "EXECUTION_STARTED", at: 1, payload }],
  expectedSeq: 0,
  fence: 1,
  status: "running",
  flow: "f",
  claimLease: { owner, expiresAtMs: 1e12 },
  index: { timersSet: [], timersCleared: [], clearAllTimers: false },
});

const step = (id: string, seq: number, payload: Json, fence = 1): AppendBatch => ({
  executionId: id,
  events: [{ executionId: id, seq, kind: "STEP_COMPLETED", at: 1 + seq, payload }],
  expectedSeq: seq,
  fence,
  status: "running",
  index: { timersSet: [], timersCleared: [], clearAllTimers: false },
});

/** An end: a step and the end in one batch, the lease released, the timers cleared. */
const ended = (id: string, seq: number, payload: Json, owner = "w"): AppendBatch => ({
  executionId: id,
  events: [
    { executionId: id, seq, kind: "STEP_COMPLETED", at: 1 + seq, payload },
    { executionId: id, seq: seq + 1, kind: "EXECUTION_COMPLETED", at: 2 + seq, payload: null },
  ],
  expectedSeq: seq,
  fence: 1,
  status: "completed",
  releaseLease: owner,
  index: { timersSet: [], timersCleared: [], clearAllTimers: true },
});

/** Resolves after `n` turns of the event loop. */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

const code = (o: AppendOutcome | undefined) => (o?.ok ? "ok" : o?.error.code);

describe("postgres: the append's fast path (append-fast.ts)", () => {
  it("F1: a start, a step and an end are taken without the routine; anything else still calls it", async () => {
    const [store] = (await fleet(1)) as [PostgresStore];
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`DROP FUNCTION "${store.schema}".${APPEND_ROUTINE}${APPEND_ROUTINE_ARGS}`);
      expect(code((await store.appendMany([started("a")]))[0])).toBe("ok");
      expect(code((await store.appendMany([step("a", 1, 1)]))[0])).toBe("ok");
      expect(code((await store.appendMany([ended("a", 2, 2)]))[0])).toBe("ok");
      expect((await store.read("a")).map((e) => e.kind)).toEqual([
        "EXECUTION_STARTED",
        "STEP_COMPLETED",
        "STEP_COMPLETED",
        "EXECUTION_COMPLETED",
      ]);
      expect(await store.getLease("a")).toMatchObject({ owner: undefined, fence: 1 });
      // A batch the statement does not take (here: after the end) goes to the routine.
      await expect(store.appendMany([step("a", 4, 4)])).rejects.toThrow(/loom_append/);
    } finally {
      await admin.end();
      await store.close();
    }
  });

  it("F8, R12: the row keeps the start's principal and the latest spent, on both paths; a step without it runs the statement it ran before", async () => {
    const [store] = (await fleet(1)) as [PostgresStore];
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const row = async (id: string) => {
      const x = (await store.list()).find((r) => r.executionId === id);
      return [x?.principal, x?.costUsd, x?.costUnknown, x?.tokens];
    };
    try {
      const routine = `"${store.schema}".${APPEND_ROUTINE}${APPEND_ROUTINE_ARGS}`;
      const { rows } = await admin.query<{ def: string }>(
        `SELECT pg_get_functiondef($1::regprocedure) AS def`,
        [routine],
      );
      await admin.query(`DROP FUNCTION ${routine}`);
      // F8: the fast path alone.
      const start = { ...started("a"), principal: "alice", spent: { costUsd: 0.5, tokens: 3 } };
      expect(code((await store.appendMany([start]))[0])).toBe("ok");
      expect(await row("a")).toEqual(["alice", 0.5, undefined, 3]);
      const sent = vi.spyOn(pg.Client.prototype, "query");
      try {
        expect(code((await store.appendMany([step("a", 1, 1)]))[0])).toBe("ok");
        const spent = { ...step("a", 2, 2), spent: { costUsd: 0.75, costUnknown: true as const } };
        expect(code((await store.appendMany([spent]))[0])).toBe("ok");
        const names = sent.mock.calls.map((c) => (c[0] as { name?: string }).name);
        expect(names.filter((n) => n?.startsWith("loom_append_"))).toEqual([
          "loom_append_advance",
          "loom_append_advance_s",
        ]);
      } finally {
        sent.mockRestore();
      }
      expect(await row("a")).toEqual(["alice", 0.75, true, undefined]);
      // R12: the routine, for one execution and for several in one call.
      await admin.query(rows[0]?.def ?? "");
      const b = { ...started("b"), principal: "bob" };
      const a3 = { ...step("a", 3, 3), spent: { costUsd: 1, tokens: 9 } };
      expect((await store.appendMany([a3, b])).map(code)).toEqual(["ok", "ok"]);
      expect(await row("a")).toEqual(["alice", 1, undefined, 9]);
      expect(await row("b")).toEqual(["bob", undefined, undefined, undefined]);
      const b1 = {
        ...step("b", 1, 1),
        spent: { tokens: 4 },
        snapshot: { seq: 1, stateJson: "{}" },
      };
      expect((await store.appendMany([step("a", 4, 4), b1])).map(code)).toEqual(["ok", "ok"]);
      expect(await row("a")).toEqual(["alice", 1, undefined, 9]);
      expect(await row("b")).toEqual(["bob", undefined, undefined, 4]);
      // A later batch's spent replaces the row's whole: what it lacks is gone (never in practice).
      const b2 = { ...step("b", 2, 2), spent: { costUsd: 2 } };
      expect(code((await store.appendMany([b2]))[0])).toBe("ok");
      expect(await row("b")).toEqual(["bob", 2, undefined, undefined]);
    } finally {
      await admin.end();
      await store.close();
    }
  });

  it("S2, F2: of concurrent steps and ends at one sequence number from several stores exactly one wins", async () => {
    const stores = await fleet(4);
    try {
      for (let round = 0; round < 25; round++) {
        const id = `r${round}`;
        expect(code((await (stores[0] as PostgresStore).appendMany([started(id)]))[0])).toBe("ok");
        for (let seq = 1; seq <= 3; seq += 2) {
          const batches = stores.map((_, w) =>
            w % 2 === 0 && seq === 3 ? ended(id, seq, { w }) : step(id, seq, { w }),
          );
          const outcomes = await Promise.all(stores.map((s, w) => s.appendMany([batches[w]!])));
          const won = outcomes.flatMap((o, w) => (o[0]?.ok ? [w] : []));
          expect(won).toHaveLength(1);
          const losers = outcomes.filter((o) => !o[0]?.ok).map((o) => code(o[0]));
          const winner = batches[won[0] ?? -1] as AppendBatch;
          // A loser is checked against the winner's log: its end, else its head.
          const lost =
            winner.status === "completed" ? "LOOM_EXECUTION_ENDED" : "LOOM_SEQUENCE_CONFLICT";
          expect(new Set(losers)).toEqual(new Set([lost]));
          const log = await (stores[1] as PostgresStore).read(id, seq);
          expect(log.slice(0, winner.events.length).map((e) => e.payload)).toEqual(
            winner.events.map((e) => e.payload),
          );
          // Either way the log goes on from the winner's head (a step at 2 after a step at 1).
          if (seq === 1) {
            expect(code((await (stores[0] as PostgresStore).appendMany([step(id, 2, 2)]))[0])).toBe(
              "ok",
            );
          }
        }
      }
    } finally {
      await closeAll(stores);
    }
  });

  it("F3: of concurrent starts of one id from several stores exactly one creates it, with its lease", async () => {
    const stores = await fleet(4);
    try {
      for (let round = 0; round < 25; round++) {
        const id = `s${round}`;
        const outcomes = await Promise.all(
          stores.map((s, w) => s.appendMany([started(id, `w${w}`, { w })])),
        );
        const won = outcomes.flatMap((o, w) => (o[0]?.ok ? [w] : []));
        expect(won).toHaveLength(1);
        for (const o of outcomes) {
          if (!o[0]?.ok) expect(code(o[0])).toMatch(/LOOM_FENCED|LOOM_SEQUENCE_CONFLICT/);
        }
        const w = won[0] ?? -1;
        expect(await (stores[1] as PostgresStore).getLease(id)).toMatchObject({
          owner: `w${w}`,
          fence: 1,
        });
        expect((await (stores[2] as PostgresStore).read(id)).map((e) => e.payload)).toEqual([
          { w },
        ]);
      }
    } finally {
      await closeAll(stores);
    }
  });

  it("S3, F2: an append under a fence a takeover moves meanwhile is refused, or the new owner's first read holds it", async () => {
    const stores = await fleet(3);
    const [a, b, c] = stores as [PostgresStore, PostgresStore, PostgresStore];
    try {
      let refused = 0;
      let accepted = 0;
      for (let round = 0; round < 40; round++) {
        const id = `t${round}`;
        // The old owner's lease expired at 10: a takeover at 20 moves the fence to 2.
        const first = { ...started(id, "old"), claimLease: { owner: "old", expiresAtMs: 10 } };
        expect(code((await a.appendMany([first]))[0])).toBe("ok");
        const late =
          round % 2 === 0 ? step(id, 1, { late: round }) : ended(id, 1, { late: round }, "old");
        // The takeover leaves a few turns of the event loop after the append (none to three), so
        // that both orders happen over the rounds.
        const takeover = turns(round % 4)
          .then(() => b.acquireLease(id, "new", { nowMs: 20, ttlMs: 1000 }))
          .then(async (lease) => ({ lease, log: await b.read(id) }));
        const [appended, { lease, log }] = await Promise.all([a.appendMany([late]), takeover]);
        const outcome = appended[0];
        if (outcome?.ok) {
          // It committed before the takeover: the new owner saw it (or the end freed the lease).
          accepted++;
          expect(log.map((e) => e.seq)).toEqual([0, ...late.events.map((e) => e.seq)]);
        } else {
          refused++;
          expect(code(outcome)).toBe("LOOM_FENCED");
          expect(lease?.fence).toBe(2);
          expect((await c.read(id)).map((e) => e.seq)).toEqual([0]);
        }
      }
      expect(refused + accepted).toBe(40);
      console.log(`fenced race: ${refused} refused, ${accepted} accepted`);
    } finally {
      await closeAll(stores);
    }
  });
});
