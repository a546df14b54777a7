import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { InvalidInputError } from "../src/kernel/errors.ts";
import type { Envelope } from "../src/kernel/events.ts";
import type { Store, StoreHooks } from "../src/store/spi.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { runStoreConformance } from "../src/testing/index.ts";

const dirs: string[] = [];
const paths = new WeakMap<Store, string>();
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function open(path: string, hooks?: StoreHooks): Store {
  const store = sqliteStore(path, { synchronous: "NORMAL", hooks });
  paths.set(store, path);
  return store;
}

runStoreConformance({
  name: "sqlite",
  newStore: (hooks) => {
    const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-"));
    dirs.push(dir);
    return open(join(dir, "loom.db"), hooks);
  },
  reopen: async (store) => {
    const path = paths.get(store);
    if (path === undefined) throw new Error("reopen of a store this file did not open");
    await store.close();
    return open(path);
  },
});

describe("sqlite: two connections on one file", () => {
  it("an append checks what another connection committed (the check cache is never stale)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-two-"));
    dirs.push(dir);
    const path = join(dir, "loom.db");
    const a = open(path);
    const b = open(path);
    const ev = (seq: number): Envelope => ({
      executionId: "x",
      seq,
      kind: seq === 0 ? "EXECUTION_STARTED" : "STEP_STARTED",
      at: seq,
      payload: { seq },
    });
    const batch = (from: number, count: number, fence: number) => ({
      executionId: "x",
      events: Array.from({ length: count }, (_, i) => ev(from + i)),
      expectedSeq: from,
      fence,
      status: "running" as const,
      flow: "f",
    });
    const leaseA = await a.acquireLease("x", "A", { ttlMs: 10, nowMs: 0 });
    expect((await a.appendMany([batch(0, 2, leaseA?.fence ?? 0)]))[0]?.ok).toBe(true);
    const leaseB = await b.acquireLease("x", "B", { ttlMs: 10, nowMs: 100 });
    expect((await b.appendMany([batch(2, 1, leaseB?.fence ?? 0)]))[0]?.ok).toBe(true);
    const late = (await a.appendMany([batch(2, 1, leaseA?.fence ?? 0)]))[0];
    expect(late?.ok).toBe(false);
    expect(late && !late.ok && late.error.code).toBe("LOOM_FENCED");
    const again = (await a.appendMany([batch(3, 1, leaseB?.fence ?? 0)]))[0];
    expect(again?.ok).toBe(true);
    expect((await b.read("x")).map((e) => e.seq)).toEqual([0, 1, 2, 3]);
    await a.close();
    await b.close();
  });

  it("reads whole logs across the settled and the hot part of the events", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-hot-"));
    dirs.push(dir);
    const store = open(join(dir, "loom.db"));
    const ids = ["a", "b", "c"];
    for (const id of ids) await store.acquireLease(id, "w", { ttlMs: 1e9, nowMs: 0 });
    const per = 1500;
    for (let from = 0; from < per; from += 100) {
      const outcomes = await store.appendMany(
        ids.map((id) => ({
          executionId: id,
          events: Array.from({ length: 100 }, (_, i): Envelope => ({
            executionId: id,
            seq: from + i,
            kind: from + i === 0 ? "EXECUTION_STARTED" : "STEP_STARTED",
            at: from + i,
            payload: { id, n: from + i },
          })),
          expectedSeq: from,
          fence: 1,
          status: "running" as const,
          flow: "f",
        })),
      );
      expect(outcomes.every((o) => o.ok)).toBe(true);
    }
    for (const id of ids) {
      const log = await store.read(id);
      expect(log.map((e) => e.seq)).toEqual(Array.from({ length: per }, (_, i) => i));
      expect(log.every((e) => (e.payload as { id: string }).id === id)).toBe(true);
      expect((await store.read(id, per - 5)).map((e) => e.seq)).toEqual([
        1495, 1496, 1497, 1498, 1499,
      ]);
      expect(await store.head(id)).toBe(per - 1);
    }
    expect((await store.list()).map((x) => [x.executionId, x.head, x.updatedAtMs])).toEqual(
      ids.map((id) => [id, per - 1, per - 1]),
    );
    await store.close();
  });
});

describe("sqlite: moving hot events", () => {
  it("a failed move never fails the committed appends, and is tried again later", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-settle-"));
    dirs.push(dir);
    const path = join(dir, "loom.db");
    const store = open(path);
    await store.acquireLease("x", "w", { ttlMs: 1e9, nowMs: 0 });
    const raw = new Database(path);
    raw.exec(
      "CREATE TRIGGER no_settle BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'injected'); END",
    );
    const append = (from: number, count: number) =>
      store.appendMany([
        {
          executionId: "x",
          events: Array.from({ length: count }, (_, i): Envelope => ({
            executionId: "x",
            seq: from + i,
            kind: from + i === 0 ? "EXECUTION_STARTED" : "STEP_STARTED",
            at: from + i,
            payload: {},
          })),
          expectedSeq: from,
          fence: 1,
          status: "running",
          flow: "f",
        },
      ]);
    for (let from = 0; from < 5000; from += 1000) {
      expect((await append(from, 1000))[0]?.ok).toBe(true);
    }
    expect(await store.head("x")).toBe(4999);
    const settled = () => raw.prepare("SELECT COUNT(*) AS n FROM events").get() as { n: number };
    expect(settled().n).toBe(0);
    raw.exec("DROP TRIGGER no_settle");
    for (let from = 5000; from < 9000; from += 1000) {
      expect((await append(from, 1000))[0]?.ok).toBe(true);
    }
    expect(settled().n).toBeGreaterThan(0);
    expect((await store.read("x")).map((e) => e.seq)).toEqual(
      Array.from({ length: 9000 }, (_, i) => i),
    );
    raw.close();
    await store.close();
  });
});

describe("sqliteStore's path", () => {
  it("a path that is not a non-empty string is InvalidInputError, before any file is opened", () => {
    const bad: unknown[] = [{ path: "x.db" }, undefined, 7, ""];
    for (const path of bad) {
      expect(() => sqliteStore(path as string), String(path)).toThrow(InvalidInputError);
    }
  });
});
