/**
 * The PostgreSQL append routine's step path (append-routine.ts R8): a batch that claims nothing,
 * under its lease's fence, is checked by the UPDATE that writes its execution row, and any other
 * batch is read, checked and answered as before (R3, R5), also when both kinds share a call.
 */
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import type { AppendBatch } from "../src/store/spi.ts";
import { postgresStore, type PostgresStore } from "../src/store/postgres/index.ts";
import { APPEND_ROUTINE } from "../src/store/postgres/append-routine.ts";
import { eventCells } from "../src/store/postgres/event-rows.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const url = pgUrl();
const schemas: string[] = [];
afterAll(() => dropSchema(url, ...schemas));

async function open(): Promise<PostgresStore> {
  const schema = schemaName("step");
  schemas.push(schema);
  return postgresStore({ connectionString: url, schema, pool: { max: 2 } });
}

const started = (id: string): AppendBatch => ({
  executionId: id,
  events: [{ executionId: id, seq: 0, kind: "EXECUTION_STARTED", at: 1, payload: { n: 0 } }],
  expectedSeq: 0,
  fence: 1,
  status: "running",
  flow: "f",
  claimLease: { owner: "w", expiresAtMs: 1e12 },
});

const step = (id: string, seq: number, extra: Partial<AppendBatch> = {}): AppendBatch => ({
  executionId: id,
  events: [{ executionId: id, seq, kind: "STEP_COMPLETED", at: 1 + seq, payload: { seq } }],
  expectedSeq: seq,
  fence: 1,
  status: "running",
  ...extra,
});

const codes = (outcomes: { ok: boolean; error?: { code: string } }[]) =>
  outcomes.map((o) => (o.ok ? "ok" : o.error?.code));

/** The JSON the client sends for `step(id, seq)` (append.ts SentBatch). */
const sentStep = (id: string, seq: number) =>
  JSON.stringify([
    {
      i: id,
      j: 1,
      x: seq,
      f: 1,
      s: "running",
      h: seq,
      a0: 1 + seq,
      a1: 1 + seq,
      e: [
        {
          q: seq,
          t: 1 + seq,
          p: JSON.stringify({ seq }),
          ...eventCells("STEP_COMPLETED", undefined),
        },
      ],
    },
  ]);

describe("postgres: a step's append (append-routine.ts R8)", () => {
  it("R8: a step writes four WAL records (its event, its index entry, the lease's lock, the execution row), not a locked read of the row first", async () => {
    const store = await open();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      expect(codes(await store.appendMany([started("a"), started("b")]))).toEqual(["ok", "ok"]);
      expect(codes(await store.appendMany([step("a", 1)]))).toEqual(["ok"]);
      await admin.query("BEGIN");
      const { rows } = await admin.query<{ "QUERY PLAN": string }>(
        `EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF)
         SELECT "${store.schema}".${APPEND_ROUTINE}($1::text[], $2::json, NULL)`,
        [["a"], sentStep("a", 2)],
      );
      await admin.query("ROLLBACK");
      const plan = rows.map((r) => r["QUERY PLAN"]).join("\n");
      // Before R8 it was five: the execution row was locked by a read, then updated.
      expect(plan).toMatch(/WAL: records=4\b/);
    } finally {
      await admin.end();
      await store.close();
    }
  });

  it("R8, R5: in one call, steps taken by the UPDATE and batches refused or read first keep their order and answers", async () => {
    const store = await open();
    try {
      expect(codes(await store.appendMany([started("a")]))).toEqual(["ok"]);
      const outcomes = await store.appendMany([
        step("a", 1),
        step("a", 1), // a sequence conflict after a step the UPDATE took
        step("a", 2, { fence: 2 }), // fenced: the lease's fence is 1
        step("a", 2),
        step("a", 3, { status: "completed" }),
        step("a", 4), // after the end
      ]);
      expect(codes(outcomes)).toEqual([
        "ok",
        "LOOM_SEQUENCE_CONFLICT",
        "LOOM_FENCED",
        "ok",
        "ok",
        "LOOM_EXECUTION_ENDED",
      ]);
      expect((await store.read("a")).map((e) => e.seq)).toEqual([0, 1, 2, 3]);
      expect(await store.head("a")).toBe(3);
      const [info] = await store.list();
      expect(info?.status).toBe("completed");
    } finally {
      await store.close();
    }
  });

  it("R8: a step whose execution row is gone is refused as the row says, and writes nothing", async () => {
    const store = await open();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      expect(codes(await store.appendMany([started("a")]))).toEqual(["ok"]);
      // The lease stays and carries the fence; only the execution row is missing.
      await admin.query(`DELETE FROM "${store.schema}".executions WHERE id = 'a'`);
      expect(codes(await store.appendMany([step("a", 1)]))).toEqual(["LOOM_SEQUENCE_CONFLICT"]);
      // Its events are under the key the deleted row held (event-rows.ts E1): only seq 0.
      const { rows } = await admin.query<{ seq: string }>(
        `SELECT seq FROM "${store.schema}".events ORDER BY seq`,
      );
      expect(rows.map((r) => Number(r.seq))).toEqual([0]);
    } finally {
      await admin.end();
      await store.close();
    }
  });
});
