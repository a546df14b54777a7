/**
 * Issue 22 on SQLite: content under an own `__proto__` key is covered by the audit hash
 * (trust/audit.ts A1), and logs stamped in the earlier hash form still verify (A5).
 */
import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { canonicalJson, createRuntime, flow$, type Json, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { mulberry32 } from "./helpers.ts";
import { textRows, writeTextRow, type TextRow } from "./support/sqlite-rows.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-proto-"));
let n = 0;
let path = join(dir, `t${n}.db`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function withDb<T>(fn: (db: Database.Database) => T): T {
  const db = new Database(path);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

type EventRow = TextRow;

function rows(id: string): EventRow[] {
  return withDb((db) => textRows(db, id));
}

function setRow(id: string, row: EventRow): void {
  withDb((db) => writeTextRow(db, id, row));
}

/**
 * The canonical JSON the audit hashed over before issue 22, written out here as it was: keys
 * sorted by assignment, so an own `__proto__` key set the copy's prototype and left the text.
 */
function legacyCanonicalJson(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v !== null && typeof v === "object") {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) out[k] = sort((v as Record<string, unknown>)[k]);
      return out;
    }
    return v;
  };
  return JSON.stringify(sort(value));
}

/** Re-stamps `id`'s rows as a runtime before issue 22 did (HMAC over the legacy form). */
function stampLegacy(id: string, key: string): void {
  let prev: string | undefined;
  for (const row of rows(id)) {
    const meta = JSON.parse(row.meta ?? "{}") as Record<string, Json>;
    delete meta.hash;
    if (prev === undefined) delete meta.prev;
    else meta.prev = prev;
    const form = {
      executionId: id,
      seq: row.seq,
      kind: row.kind,
      at: row.at,
      payload: JSON.parse(row.payload) as Json,
      meta,
    };
    const hash = createHmac("sha256", key).update(legacyCanonicalJson(form)).digest("base64url");
    prev = hash;
    setRow(id, { ...row, meta: JSON.stringify({ ...meta, hash }) });
  }
}

const note = flow$("note", async (ctx, input: Json) => {
  return ctx.run("echo", () => input);
});

/** A payload whose one field sits under an own `__proto__` key, as JSON.parse makes it. */
const withProto = (): Json => JSON.parse('{"to":"bob","__proto__":{"amount":5}}') as Json;

describe("the audit hash and own __proto__ keys", () => {
  const open: Runtime[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((r) => r.close()));
    n++;
    path = join(dir, `t${n}.db`);
  });
  function runtime(): Runtime {
    const r = createRuntime({ store: sqliteStore(path), audit: { key: "audit-key" } });
    open.push(r);
    return r.registerFlow(note);
  }

  it("A1: changing content under an own __proto__ key breaks verification", async () => {
    const r = runtime();
    await (await r.start("note", withProto(), { id: "n" })).result();
    expect(await r.verifyLog("n")).toMatchObject({ ok: true });
    const start = rows("n")[0] as EventRow;
    expect(start.payload).toContain('"__proto__":{"amount":5}');
    setRow("n", { ...start, payload: start.payload.replace('"amount":5', '"amount":5000') });
    expect(await r.verifyLog("n")).toMatchObject({ ok: false, firstBadSeq: 0, problem: "changed" });
  });

  it("A5: a log stamped with the earlier hash form still verifies, and a changed event in it is still found", async () => {
    const r = runtime();
    await (await r.start("note", { to: "bob", amount: 5 }, { id: "old" })).result();
    stampLegacy("old", "audit-key");
    expect(await r.verifyLog("old")).toMatchObject({ ok: true, events: rows("old").length });
    const start = rows("old")[0] as EventRow;
    setRow("old", { ...start, payload: start.payload.replace('"amount":5', '"amount":6') });
    expect(await r.verifyLog("old")).toMatchObject({ ok: false, firstBadSeq: 0 });
  });

  it("A5: the earlier canonical form and the new one agree on every value without a __proto__ key", () => {
    const seed = 22;
    const rand = mulberry32(seed);
    const keys = ["a", "b", "z", "A", "10", "2", "é", "", "constructor", "toString", "$sealed"];
    const value = (depth: number): Json => {
      const pick = rand();
      if (depth > 3 || pick < 0.3) {
        const leaves: Json[] = [null, true, false, 0, -1.5, 1e21, "", "x\u2028y", "\ud83d\ude00"];
        return leaves[Math.floor(rand() * leaves.length)] ?? null;
      }
      if (pick < 0.55)
        return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1));
      const out: Record<string, Json> = {};
      for (let i = Math.floor(rand() * 5); i > 0; i--) {
        out[keys[Math.floor(rand() * keys.length)] ?? "k"] = value(depth + 1);
      }
      return out;
    };
    for (let i = 0; i < 2000; i++) {
      const v = value(0);
      expect(canonicalJson(v), `seed ${seed}, value ${i}`).toBe(legacyCanonicalJson(v));
    }
    // And where they differ: the new form keeps what the earlier one dropped.
    expect(legacyCanonicalJson(withProto())).toBe('{"to":"bob"}');
    expect(canonicalJson(withProto())).toBe('{"__proto__":{"amount":5},"to":"bob"}');
  });
});
