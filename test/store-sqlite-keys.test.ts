/**
 * SQLite's `destroyKey` (S19, src/store/sqlite/keys.ts K2) leaves no copy of the material in the
 * files: the raw bytes of the database file and its WAL are searched for it, before (where it
 * must be found, or the search proves nothing) and after.
 */
import Database from "better-sqlite3";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteStore, type SqliteStoreOptions } from "../src/store/sqlite/index.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function freshPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-keys-"));
  dirs.push(dir);
  return join(dir, "loom.db");
}

/** The database file and its WAL, as bytes on disk (the WAL is absent once the store closed). */
function files(path: string): { db: Buffer; wal: Buffer } {
  const wal = `${path}-wal`;
  return { db: readFileSync(path), wal: existsSync(wal) ? readFileSync(wal) : Buffer.alloc(0) };
}

/** Where `material` is in the files: its count in each. */
function traces(path: string, material: string): { db: number; wal: number } {
  const { db, wal } = files(path);
  const count = (bytes: Buffer) => {
    let n = 0;
    for (let at = bytes.indexOf(material); at >= 0; at = bytes.indexOf(material, at + 1)) n++;
    return n;
  };
  return { db: count(db), wal: count(wal) };
}

/** A material no other byte sequence in the files could match by chance. */
const secret = () => `secret-${randomBytes(16).toString("hex")}`;

const open = (path: string, options: SqliteStoreOptions = {}) =>
  sqliteStore(path, { synchronous: "NORMAL", ...options });

describe("sqlite: destroyKey leaves no trace in the files (S19)", () => {
  it("the material is in the database or its WAL before, and in neither after", async () => {
    const path = freshPath();
    const store = open(path);
    try {
      const material = secret();
      const neighbour = secret();
      await store.putKey("subject:a", material);
      await store.putKey("subject:b", neighbour);
      const before = traces(path, material);
      expect(before.db + before.wal).toBeGreaterThan(0);
      expect(await store.destroyKey("subject:a")).toEqual({ existed: true });
      expect(traces(path, material)).toEqual({ db: 0, wal: 0 });
      // The search finds what is there: the neighbour's material, which stays.
      const kept = traces(path, neighbour);
      expect(kept.db + kept.wal).toBeGreaterThan(0);
      expect(await store.getKey("subject:b")).toBe(neighbour);
    } finally {
      await store.close();
    }
  });

  it("no copy survives that page splits made while keys were put", async () => {
    const path = freshPath();
    const store = open(path);
    try {
      // Enough keys for the table to span many pages, put out of id order so pages split
      // in the middle and rows move.
      const count = 1500;
      const materials = new Map<string, string>();
      for (let i = 0; i < count; i++) {
        const id = `k${String((i * 7919) % count).padStart(5, "0")}`;
        materials.set(id, secret());
        await store.putKey(id, materials.get(id) as string);
      }
      const ids = [...materials.keys()].sort();
      const destroyed = ids.filter((_, i) => i % 10 === 0);
      for (const id of destroyed) expect(await store.destroyKey(id)).toEqual({ existed: true });
      const { db, wal } = files(path);
      const bytes = Buffer.concat([db, wal]);
      const left = destroyed.filter((id) => bytes.includes(materials.get(id) as string));
      expect(left).toEqual([]);
      const kept = ids.filter((_, i) => i % 10 !== 0);
      expect(kept.filter((id) => !bytes.includes(materials.get(id) as string))).toEqual([]);
      expect(await store.listKeys("k")).toEqual(kept);
    } finally {
      await store.close();
    }
  });

  it("a reader's snapshot delays the WAL's scrub, never the destroy, and the destroy says so; a later destroy completes it", async () => {
    const path = freshPath();
    // The checkpoint waits for the reader as long as the busy timeout: short here.
    const store = open(path, { busyTimeoutMs: 50 });
    const reader = new Database(path);
    try {
      const material = secret();
      await store.putKey("subject:a", material);
      reader.exec("BEGIN");
      reader.prepare("SELECT count(*) FROM keys").get();
      // Deleted, but the bytes are not claimed gone while the reader holds them (issue 22).
      expect(await store.destroyKey("subject:a")).toEqual({
        existed: true,
        unconfirmed: expect.stringMatching(/reader/) as unknown,
      });
      expect(await store.getKey("subject:a")).toBeUndefined();
      const held = traces(path, material);
      expect(held.db + held.wal).toBeGreaterThan(0);
      // The reader still sees its snapshot, from the WAL frames the checkpoint could not drop.
      expect(reader.prepare("SELECT material FROM keys WHERE id = 'subject:a'").pluck().get()).toBe(
        material,
      );
      reader.exec("COMMIT");
      expect(await store.destroyKey("never-put")).toEqual({ existed: false });
      expect(traces(path, material)).toEqual({ db: 0, wal: 0 });
    } finally {
      reader.close();
      await store.close();
    }
  });
});
