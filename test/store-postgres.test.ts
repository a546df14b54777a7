/**
 * The PostgreSQL store: the whole store conformance suite (S1..S16, S19, S20) and the fleet suite (S17,
 * S18), each store in a fresh schema dropped afterwards; then what only PostgreSQL has: schemas
 * migrated by many processes at once, a listener that reconnects, values it cannot store refused
 * as bad input, appends that are one statement (the append routine, append-routine.ts) on schemas
 * made before it, and S1 under SIGKILL of a process appending.
 *
 * The database is LOOM_PG_URL (docs/postgres.md says how to start one). Without it only the
 * option checks run, which need no database.
 */
import { spawn } from "./support/processes.ts";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it, vi } from "vitest";
import { isLoomError } from "../src/kernel/errors.ts";
import type { Envelope } from "../src/kernel/events.ts";
import type { AppendBatch, FleetWake, StoreHooks } from "../src/store/spi.ts";
import { runFleetConformance, runStoreConformance } from "../src/testing/index.ts";
import { postgresStore, type PostgresStore } from "../src/store/postgres/index.ts";
import { APPEND_ROUTINE, APPEND_ROUTINE_ARGS } from "../src/store/postgres/append-routine.ts";
import { MIGRATIONS } from "../src/store/postgres/migrations.ts";
import { mulberry32, until } from "./helpers.ts";
import { dropSchema, schemaName } from "./support/postgres.ts";
import { slow } from "./support/slowdown.ts";

const PG_URL = process.env.LOOM_PG_URL;

function expectOk(outcomes: { ok: boolean }[]): void {
  expect(outcomes.map((o) => o.ok)).toEqual(outcomes.map(() => true));
}

async function refusal(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe("postgresStore options", () => {
  it("refuses a bad schema, pool size or connection string before it connects (LOOM_INVALID_INPUT)", async () => {
    // No server answers at this address: only a refusal before connecting comes back typed.
    const nowhere = "postgres://loom@nowhere.invalid:1/none";
    const bad = [
      { connectionString: nowhere, schema: "Loom" },
      { connectionString: nowhere, schema: "a-b" },
      { connectionString: nowhere, schema: "1abc" },
      { connectionString: nowhere, schema: "x".repeat(49) },
      { connectionString: nowhere, pool: { max: 0 } },
      { connectionString: nowhere, pool: { max: 1.5 } },
      { connectionString: "" },
    ];
    for (const options of bad) {
      const error = await refusal(postgresStore(options));
      expect(isLoomError(error, "LOOM_INVALID_INPUT"), JSON.stringify(options)).toBe(true);
    }
  });
});

if (PG_URL === undefined || PG_URL === "") {
  console.warn("store-postgres: LOOM_PG_URL is not set; the PostgreSQL suite does not run");
} else {
  postgresSuites(PG_URL);
}

function postgresSuites(url: string): void {
  const schemas = new Set<string>();
  const freshSchema = () => {
    const schema = schemaName("t");
    schemas.add(schema);
    return schema;
  };
  afterAll(() => dropSchema(url, ...schemas));
  const open = (schema: string, hooks?: StoreHooks) =>
    postgresStore({ connectionString: url, schema, pool: { max: 4 }, ...(hooks ? { hooks } : {}) });

  runStoreConformance<PostgresStore>({
    name: "postgres",
    newStore: (hooks) => open(freshSchema(), hooks),
    reopen: async (store) => {
      await store.close();
      return open(store.schema);
    },
  });

  runFleetConformance<PostgresStore>({
    name: "postgres",
    newStore: (hooks) => open(freshSchema(), hooks),
    peer: (store) => open(store.schema),
  });

  describe("postgres: schemas and connections", () => {
    it("M1: processes opening one schema at once migrate it once, and share it", async () => {
      const schema = freshSchema();
      const stores = await Promise.all(Array.from({ length: 5 }, () => open(schema)));
      try {
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        const { rows } = await admin.query<{ version: number }>(
          `SELECT version FROM "${schema}".migrations ORDER BY version`,
        );
        await admin.end();
        expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
        const [a, b] = stores as [PostgresStore, PostgresStore];
        const lease = await a.acquireLease("x", "w", { ttlMs: 1000, nowMs: 0 });
        const events: Envelope[] = [
          { executionId: "x", seq: 0, kind: "EXECUTION_STARTED", at: 5, payload: { k: [1] } },
        ];
        const batch = { executionId: "x", events, expectedSeq: 0, status: "running" as const };
        expect(await a.appendMany([{ ...batch, fence: lease?.fence ?? 0, flow: "f" }])).toEqual([
          { ok: true },
        ]);
        expect(await b.read("x")).toEqual(events);
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    });

    it("N3: a listener whose connection drops reconnects, and hears again", async () => {
      const schema = freshSchema();
      const store = await open(schema);
      try {
        const wakes: FleetWake[] = [];
        const stop = await store.listen((w) => wakes.push(w));
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        const killed = await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE application_name = 'loom-listen' AND query = $1`,
          [`LISTEN "loom_wake:${schema}"`],
        );
        await admin.end();
        expect(killed.rowCount).toBe(1);
        // Wakes sent while it is down are lost (best effort): send until one is heard.
        let sent = 0;
        await until(async () => {
          await store.appendMessage("c", { topic: "t", key: `k${sent++}`, payload: 1, atMs: 0 });
          await new Promise((r) => setTimeout(r, 20));
          return wakes.length > 0;
        }, slow(10_000));
        expect(wakes[0]).toEqual({ kind: "message", chainId: "c" });
        await stop();
      } finally {
        await store.close();
      }
    });

    it("D2: a group commit PostgreSQL aborts to break a deadlock runs again, and both commit", async () => {
      const schema = freshSchema();
      const store = await open(schema);
      // `holder` holds a row lock; `admin` watches (a transaction's view of the statistics is
      // fixed at its first read, so the two cannot be one connection).
      const [admin, holder] = [url, url].map((u) => new pg.Client({ connectionString: u })) as [
        pg.Client,
        pg.Client,
      ];
      await Promise.all([admin.connect(), holder.connect()]);
      const pending: Promise<unknown>[] = [];
      try {
        const batchWaking = (id: string, order: readonly string[]) => ({
          executionId: id,
          events: [{ executionId: id, seq: 1, kind: "STEP_STARTED" as const, at: 2, payload: {} }],
          expectedSeq: 1,
          fence: 1,
          status: "running" as const,
          index: {
            timersSet: [],
            timersCleared: [],
            clearAllTimers: false,
            wakes: order.map((w) => ({ executionId: w, timerId: "watch:shared", wakeAtMs: 9 })),
          },
        });
        for (const id of ["a", "b"]) {
          await store.acquireLease(id, "w", { ttlMs: 1e9, nowMs: 0 });
          const first: Envelope = {
            executionId: id,
            seq: 0,
            kind: "EXECUTION_STARTED",
            at: 1,
            payload: {},
          };
          const start = { ...batchWaking(id, ["y", "z"]), events: [first], expectedSeq: 0 };
          expect(await store.appendMany([{ ...start, flow: "f" }])).toEqual([{ ok: true }]);
        }
        // a waits for y (held here), b takes z and queues for y behind a; released, a takes y and
        // waits for z: a deadlock, which PostgreSQL breaks by aborting one of them.
        const waiting = async (n: number) =>
          until(async () => {
            const { rows } = await admin.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
               WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`,
              [`"${schema}".timers`],
            );
            return (rows[0]?.n ?? 0) >= n;
          });
        const deadlocks = async () => {
          const { rows } = await admin.query<{ n: number }>(
            "SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()",
          );
          return rows[0]?.n ?? 0;
        };
        const before = await deadlocks();
        await holder.query("BEGIN");
        await holder.query(`SELECT 1 FROM "${schema}".timers WHERE execution_id = 'y' FOR UPDATE`);
        const a = store.appendMany([batchWaking("a", ["y", "z"])]);
        pending.push(a);
        await waiting(1);
        const b = store.appendMany([batchWaking("b", ["z", "y"])]);
        pending.push(b);
        await waiting(2);
        await holder.query("COMMIT");
        expect(await Promise.all([a, b])).toEqual([[{ ok: true }], [{ ok: true }]]);
        expect([await store.head("a"), await store.head("b")]).toEqual([1, 1]);
        // Statistics reach pg_stat_database within a second or so.
        await until(async () => (await deadlocks()) > before, 10_000);
      } finally {
        await holder.end();
        await Promise.allSettled(pending);
        await admin.end();
        await store.close();
      }
    });

    it("D3: values PostgreSQL cannot store are refused as bad input, one batch at a time", async () => {
      const store = await open(freshSchema());
      try {
        for (const id of ["a", "b", "c"])
          await store.acquireLease(id, "w", { ttlMs: 1000, nowMs: 0 });
        const one = (id: string, extra: Partial<Envelope> = {}) => ({
          executionId: id,
          events: [
            {
              executionId: id,
              seq: 0,
              kind: "EXECUTION_STARTED" as const,
              at: 1,
              payload: {},
              ...extra,
            },
          ],
          expectedSeq: 0,
          fence: 1,
          status: "running" as const,
          flow: "f",
        });
        const outcomes = await store.appendMany([
          one("a"),
          { ...one("b"), flow: "nul\u0000flow" },
          one("c", { at: 1.5 }),
        ]);
        expect(outcomes.map((o) => (o.ok ? "ok" : o.error.code))).toEqual([
          "ok",
          "LOOM_INVALID_INPUT",
          "LOOM_INVALID_INPUT",
        ]);
        expect(await store.head("a")).toBe(0);
        expect(await store.head("b")).toBe(-1);
        const calls = [
          () => store.acquireLease("nul\u0000", "w", { ttlMs: 1000, nowMs: 0 }),
          () => store.appendMessage("c", { topic: "t\u0000", key: "k", payload: null, atMs: 0 }),
          () => store.deferTimer("a", "t", 0.5),
        ];
        for (const call of calls) {
          expect(isLoomError(await refusal(call()), "LOOM_INVALID_INPUT")).toBe(true);
        }
      } finally {
        await store.close();
      }
    });
  });

  describe("postgres: one-statement appends (append.ts A3..A5, append-routine.ts R1..R6)", () => {
    const started = (id: string, extra: Partial<AppendBatch> = {}): AppendBatch => ({
      executionId: id,
      events: [{ executionId: id, seq: 0, kind: "EXECUTION_STARTED", at: 1, payload: { n: 0 } }],
      expectedSeq: 0,
      fence: 1,
      status: "running",
      flow: "f",
      claimLease: { owner: "w", expiresAtMs: 1e12 },
      ...extra,
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

    it("A4: an append is one statement, for one execution or several, refusals included", async () => {
      const store = await open(freshSchema());
      try {
        expect(codes(await store.appendMany([started("a"), started("b")]))).toEqual(["ok", "ok"]);
        const sent = vi.spyOn(pg.Client.prototype, "query");
        try {
          expect(codes(await store.appendMany([step("a", 1)]))).toEqual(["ok"]);
          expect(sent).toHaveBeenCalledTimes(1);
          sent.mockClear();
          const outcomes = await store.appendMany([step("b", 1), step("a", 2), step("a", 2)]);
          expect(codes(outcomes)).toEqual(["ok", "ok", "LOOM_SEQUENCE_CONFLICT"]);
          expect(sent).toHaveBeenCalledTimes(1);
          sent.mockClear();
          // Refused before sending (empty): no statement at all.
          const empty = { ...step("a", 3), events: [] };
          expect(codes(await store.appendMany([empty]))).toEqual(["LOOM_INVALID_INPUT"]);
          expect(sent).not.toHaveBeenCalled();
        } finally {
          sent.mockRestore();
        }
        expect([await store.head("a"), await store.head("b")]).toEqual([2, 1]);
      } finally {
        await store.close();
      }
    });

    it("M3: a schema made before the append routine gets it when opened, and keeps its logs", async () => {
      const schema = freshSchema();
      const first = await open(schema);
      expect(codes(await first.appendMany([started("a")]))).toEqual(["ok"]);
      await first.close();
      // What the previous release left: the same tables and data, no routine.
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        await admin.query(`DROP FUNCTION "${schema}".${APPEND_ROUTINE}${APPEND_ROUTINE_ARGS}`);
        const again = await open(schema);
        try {
          expect(codes(await again.appendMany([step("a", 1)]))).toEqual(["ok"]);
          expect((await again.read("a")).map((e) => e.payload)).toEqual([{ n: 0 }, { seq: 1 }]);
        } finally {
          await again.close();
        }
        const { rows } = await admin.query<{ version: number }>(
          `SELECT version FROM "${schema}".migrations ORDER BY version`,
        );
        expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
      } finally {
        await admin.end();
      }
    });

    it("A5: a lone surrogate is stored as U+FFFD, as in any other parameter, and refuses nothing", async () => {
      const store = await open(freshSchema());
      try {
        const lone = "a\ud800";
        const outcomes = await store.appendMany([started(lone, { flow: "f\udc00" }), started("b")]);
        expect(codes(outcomes)).toEqual(["ok", "ok"]);
        expect(await store.read(lone)).toEqual(started(lone).events);
        expect((await store.getLease(lone))?.owner).toBe("w");
        const listed = await store.list();
        expect(listed.map((x) => [x.executionId, x.flow])).toEqual([
          ["a\ufffd", "f\ufffd"],
          ["b", "f"],
        ]);
      } finally {
        await store.close();
      }
    });

    it("a fence or sequence number no BIGINT can hold refuses its batch only, as a mismatch", async () => {
      const store = await open(freshSchema());
      try {
        expectOk(await store.appendMany([started("a"), started("b"), started("c")]));
        const shifted = (seq: number) => ({
          ...step("c", 1),
          events: [{ ...step("c", 1).events[0], seq } as Envelope],
          expectedSeq: seq,
        });
        const outcomes = await store.appendMany([
          step("a", 1, { fence: 1.5 }),
          step("b", 1, { fence: Number.NaN }),
          shifted(1.5),
          shifted(2 ** 70),
          step("a", 1),
        ]);
        expect(codes(outcomes)).toEqual([
          "LOOM_FENCED",
          "LOOM_FENCED",
          "LOOM_SEQUENCE_CONFLICT",
          "LOOM_SEQUENCE_CONFLICT",
          "ok",
        ]);
        expect([await store.head("a"), await store.head("b"), await store.head("c")]).toEqual([
          1, 0, 0,
        ]);
      } finally {
        await store.close();
      }
    });
  });

  describe("postgres: S1 under SIGKILL", () => {
    const BATCH = 2000;
    const worker = join(import.meta.dirname, "fixtures", "store", "append-forever.ts");

    async function runAndKill(schema: string, afterReadyMs: number): Promise<void> {
      const child = spawn(process.execPath, ["--import", "tsx", worker, url, schema], {
        stdio: ["ignore", "ignore", "pipe"],
      });
      await new Promise<void>((resolve, reject) => {
        let err = "";
        child.stderr.on("data", (d: Buffer) => {
          err += d.toString();
          if (err.includes("ready")) resolve();
        });
        child.on("exit", (code) => reject(new Error(`worker exited early (${code}): ${err}`)));
      });
      await new Promise((r) => setTimeout(r, afterReadyMs));
      const exited = new Promise((r) => child.on("exit", r));
      child.kill("SIGKILL");
      await exited;
    }

    it("keeps whole batches only, across 6 kills at seeded moments", async () => {
      const schema = freshSchema();
      const random = mulberry32(11);
      let previous = 0;
      for (let kill = 0; kill < 6; kill++) {
        await runAndKill(schema, Math.floor(random() * 150));
        const store = await open(schema);
        try {
          // The killed process's last transaction may still be ending (a COMMIT it sent lands
          // after it died): taking its lease waits for that, as the next owner would.
          await store.acquireLease("x", "w", { ttlMs: 1e12, nowMs: 0 });
          const events = await store.read("x");
          expect(events.length % BATCH, `kill ${kill}: ${events.length} events`).toBe(0);
          expect(events.every((e, i) => e.seq === i)).toBe(true);
          expect(events.length, `kill ${kill}: the log grew`).toBeGreaterThan(previous);
          // The execution row moved with the events, in their transaction.
          expect((await store.list()).map((x) => x.head)).toEqual([events.length - 1]);
          previous = events.length;
        } finally {
          await store.close();
        }
      }
    });
  });
}
