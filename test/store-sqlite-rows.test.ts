/**
 * The SQLite row format of migration 6 (src/store/sqlite/row-codec.ts C1..C3) and deflated
 * snapshots (snapshots.ts N1): a file made by the schema before upgrades with its logs readable,
 * and what a row holds now.
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Envelope } from "../src/kernel/events.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { MIGRATIONS } from "../src/store/sqlite/migrations.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-rows-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(dir, `f${++n}.db`);

/** A file at schema version 5 (before migration 6), with rows as that release wrote them. */
function previousSchemaFile(): string {
  const path = fresh();
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  MIGRATIONS.slice(0, 5).forEach((sql) => db.exec(sql));
  db.pragma("user_version = 5");
  const exec = db.prepare(
    "INSERT INTO executions (id, flow, status, created_at) VALUES (?, ?, ?, ?)",
  );
  exec.run("b-old", "f", "completed", 10);
  exec.run("a-old", "f", "running", 20);
  const settled = db.prepare(
    "INSERT INTO events (execution_id, seq, kind, at, payload, meta) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const hot = db.prepare(
    "INSERT INTO events_hot (execution_id, seq, kind, at, payload, meta) VALUES (?, ?, ?, ?, ?, ?)",
  );
  settled.run("b-old", 0, "EXECUTION_STARTED", 10, '{"flow":"f"}', '{"fence":1}');
  settled.run("b-old", 1, "STEP_COMPLETED", 11, '{"callId":"s#0","output":1}', '{"fence":1}');
  hot.run("b-old", 2, "EXECUTION_COMPLETED", 12, '{"output":1}', '{"kernel":true,"fence":1}');
  hot.run("a-old", 0, "EXECUTION_STARTED", 20, '{"flow":"f"}', '{"fence":2,"hash":"h"}');
  hot.run("a-old", 1, "DECISION_RECORDED", 21, '{"callId":"d#0","value":2}', null);
  db.prepare("INSERT INTO snapshots (execution_id, seq, state) VALUES (?, ?, ?)").run(
    "a-old",
    1,
    '{"status":"running"}',
  );
  db.close();
  return path;
}

const strip = (log: Envelope[]) =>
  log.map(({ seq, kind, at, payload, meta }) => ({ seq, kind, at, payload, meta }));

describe("sqlite rows (migration 6)", () => {
  it("C1..C3: a file made by the previous schema upgrades, and its logs, heads and list read the same", async () => {
    const path = previousSchemaFile();
    const store = sqliteStore(path, { synchronous: "NORMAL" });
    expect(strip(await store.read("b-old"))).toEqual([
      { seq: 0, kind: "EXECUTION_STARTED", at: 10, payload: { flow: "f" }, meta: { fence: 1 } },
      {
        seq: 1,
        kind: "STEP_COMPLETED",
        at: 11,
        payload: { callId: "s#0", output: 1 },
        meta: { fence: 1 },
      },
      {
        seq: 2,
        kind: "EXECUTION_COMPLETED",
        at: 12,
        payload: { output: 1 },
        meta: { kernel: true, fence: 1 },
      },
    ]);
    const a = await store.read("a-old");
    expect(a[0]?.meta).toEqual({ fence: 2, hash: "h" });
    expect(a[1]).not.toHaveProperty("meta");
    expect(await store.head("a-old")).toBe(1);
    expect((await store.list()).map((s) => [s.executionId, s.head, s.updatedAtMs])).toEqual([
      ["a-old", 1, 21],
      ["b-old", 2, 12],
    ]);
    expect((await store.loadSnapshot("a-old"))?.state).toEqual({ status: "running" });
    // An old execution takes appends under its new key; a new one gets the next key.
    await store.acquireLease("a-old", "w", { ttlMs: 1e9, nowMs: 0 });
    await store.acquireLease("c-new", "w", { ttlMs: 1e9, nowMs: 0 });
    const more = await store.appendMany([
      {
        executionId: "a-old",
        events: [
          {
            executionId: "a-old",
            seq: 2,
            kind: "STEP_STARTED",
            at: 22,
            payload: {},
            meta: { fence: 2 },
          },
        ],
        expectedSeq: 2,
        fence: 1,
        status: "running",
      },
      {
        executionId: "c-new",
        events: [
          {
            executionId: "c-new",
            seq: 0,
            kind: "EXECUTION_STARTED",
            at: 30,
            payload: {},
            meta: { fence: 1 },
          },
        ],
        expectedSeq: 0,
        fence: 1,
        status: "running",
        flow: "f",
      },
    ]);
    expect(more.map((o) => o.ok)).toEqual([true, true]);
    expect((await store.read("a-old")).map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "DECISION_RECORDED",
      "STEP_STARTED",
    ]);
    expect(await store.head("c-new")).toBe(0);
    expect(await store.deleteExecution("b-old")).toBe(true);
    expect(await store.read("b-old")).toEqual([]);
    expect((await store.read("a-old")).length).toBe(3);
    await store.close();
    const db = new Database(path);
    expect(db.pragma("user_version", { simple: true })).toBe(MIGRATIONS.length);
    const keys = db.prepare("SELECT id, n FROM executions ORDER BY n").all();
    expect(keys).toEqual([
      { id: "a-old", n: 1 },
      { id: "c-new", n: 3 },
    ]);
    db.close();
  });

  it("C1..C3: a row holds the execution's integer key, a kind code and a bare fence; other metas and kinds as text", async () => {
    const path = fresh();
    const store = sqliteStore(path, { synchronous: "NORMAL" });
    await store.acquireLease("x", "w", { ttlMs: 1e9, nowMs: 0 });
    const events: Envelope[] = [
      {
        executionId: "x",
        seq: 0,
        kind: "EXECUTION_STARTED",
        at: 1,
        payload: {},
        meta: { fence: 7 },
      },
      {
        executionId: "x",
        seq: 1,
        kind: "STEP_COMPLETED",
        at: 2,
        payload: { o: 1 },
        meta: { kernel: true, fence: 7 },
      },
      { executionId: "x", seq: 2, kind: "NOT_A_KIND" as Envelope["kind"], at: 3, payload: [] },
    ];
    expect(
      (
        await store.appendMany([
          { executionId: "x", events, expectedSeq: 0, fence: 1, status: "running", flow: "f" },
        ])
      )[0]?.ok,
    ).toBe(true);
    expect(strip(await store.read("x"))).toEqual(strip(events));
    await store.close();
    const db = new Database(path);
    const rows = db.prepare("SELECT x, seq, kind, meta FROM events_hot ORDER BY seq").all();
    db.close();
    expect(rows).toEqual([
      { x: 1, seq: 0, kind: 0, meta: 7 },
      { x: 1, seq: 1, kind: 2, meta: '{"kernel":true,"fence":7}' },
      { x: 1, seq: 2, kind: "NOT_A_KIND", meta: null },
    ]);
  });

  it("C1, append.ts A4: keys reserved in blocks stay unique across connections and a rolled-back append", async () => {
    const path = fresh();
    let failNext = false;
    const hooks = {
      beforeCommit: () => {
        if (!failNext) return;
        failNext = false;
        throw new Error("injected: the transaction rolls back");
      },
    };
    const a = sqliteStore(path, { synchronous: "NORMAL", hooks });
    const b = sqliteStore(path, { synchronous: "NORMAL" });
    const startOn = (store: typeof a, id: string) =>
      store.appendMany([
        {
          executionId: id,
          events: [{ executionId: id, seq: 0, kind: "EXECUTION_STARTED", at: 1, payload: { id } }],
          expectedSeq: 0,
          fence: 1,
          claimLease: { owner: "w", expiresAtMs: 1e12 },
          status: "running",
          flow: "f",
        },
      ]);
    const ids: string[] = [];
    for (let i = 0; i < 80; i++) {
      const store = i % 3 === 0 ? b : a;
      const id = `e${i}`;
      // Some appends of `a` roll back, its first (which reserved its first block) among them.
      failNext = store === a && i % 7 === 1;
      if (failNext) {
        await expect(startOn(store, id)).rejects.toThrow(/injected/);
        continue;
      }
      expect((await startOn(store, id))[0]?.ok).toBe(true);
      ids.push(id);
    }
    for (const id of ids) {
      expect((await b.read(id)).map((e) => e.payload)).toEqual([{ id }]);
    }
    await a.close();
    await b.close();
    const db = new Database(path);
    const keys = db.prepare("SELECT n FROM executions").pluck().all() as number[];
    db.close();
    expect(keys).toHaveLength(ids.length);
    expect(new Set(keys).size).toBe(ids.length);
  });

  it("C2: a kind code no release wrote is a corrupt row, named with its seq", async () => {
    const path = fresh();
    const store = sqliteStore(path, { synchronous: "NORMAL" });
    await store.acquireLease("y", "w", { ttlMs: 1e9, nowMs: 0 });
    const e: Envelope = { executionId: "y", seq: 0, kind: "EXECUTION_STARTED", at: 1, payload: {} };
    await store.appendMany([
      { executionId: "y", events: [e], expectedSeq: 0, fence: 1, status: "running" },
    ]);
    const db = new Database(path);
    db.prepare("UPDATE events_hot SET kind = 999").run();
    db.close();
    await expect(store.read("y")).rejects.toMatchObject({ code: "LOOM_LOG_CORRUPT" });
    await store.close();
  });

  it("N1: a large snapshot is kept deflated and reads back whole; a small one stays text", async () => {
    const path = fresh();
    const store = sqliteStore(path, { synchronous: "NORMAL" });
    const big = {
      frames: Object.fromEntries(
        Array.from({ length: 200 }, (_, i) => [`s#${i}`, { status: "completed", output: i }]),
      ),
    };
    await store.saveSnapshot("big", { seq: 3, state: big as never });
    await store.saveSnapshot("small", { seq: 1, state: { status: "running" } as never });
    expect((await store.loadSnapshot("big"))?.state).toEqual(big);
    expect((await store.loadSnapshot("small"))?.state).toEqual({ status: "running" });
    await store.close();
    const db = new Database(path);
    const cells = db
      .prepare<[], { execution_id: string; t: string; bytes: number }>(
        "SELECT execution_id, typeof(state) AS t, length(state) AS bytes FROM snapshots ORDER BY execution_id",
      )
      .all();
    db.close();
    expect(cells.map((c) => [c.execution_id, c.t])).toEqual([
      ["big", "blob"],
      ["small", "text"],
    ]);
    expect(cells[0]?.bytes).toBeLessThan(JSON.stringify(big).length / 4);
  });

  it("N2: a deflated state past one inflate chunk, ASCII or not, reads back whole", async () => {
    const store = sqliteStore(fresh(), { synchronous: "NORMAL" });
    const frames = (text: (i: number) => string) =>
      Object.fromEntries(
        Array.from({ length: 3000 }, (_, i) => [
          `s#${i}`,
          { status: "completed", output: text(i) },
        ]),
      );
    const ascii = { frames: frames((i) => `r${i}-${"x".repeat(i % 40)}`) };
    // Characters whose UTF-8 bytes are above 0x7f: read as latin1 they would come back as others.
    const wide = { frames: frames((i) => `r${i}-é✓ÿ😀${"\u0000".repeat(i % 3)}`) };
    expect(JSON.stringify(ascii).length).toBeGreaterThan(3 * 64 * 1024);
    await store.saveSnapshot("ascii", { seq: 5, state: ascii as never });
    await store.saveSnapshot("wide", { seq: 6, state: wide as never });
    expect((await store.loadSnapshot("ascii"))?.state).toEqual(ascii);
    expect((await store.loadSnapshot("wide"))?.state).toEqual(wide);
    await store.close();
  });
});
