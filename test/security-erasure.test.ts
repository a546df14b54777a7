/**
 * Issue 22, erasure (src/runtime/erase-subject.ts X5, X6; src/store/sqlite/keys.ts K2), written as
 * the exploits: a resume payload that rode a `continueAsNew` carry must leave no byte in the SQLite
 * file or its WAL after `eraseSubject`, with or without a codec; a field the redaction does not
 * know is not kept; and with a reader holding an older snapshot of the database open, erasure may
 * not claim `keyDestroyed: true` while the key's bytes are still in the files.
 */
import Database from "better-sqlite3";
import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  aesGcmCodec,
  createRuntime,
  type ExecutionState,
  type RuntimeOptions,
  type Store,
} from "../src/index.ts";
import { eraseSubjectCommand } from "../src/cli/commands/erase-subject.ts";
import type { Io } from "../src/cli/io.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { subjectKeyId } from "../src/trust/sealed-store.ts";
import { redactedState } from "../src/runtime/erase-redacted.ts";
import { carryFlow, carryResumePayload } from "./support/erasure-carry.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function freshPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "loom-security-erasure-"));
  dirs.push(dir);
  return join(dir, "loom.db");
}

/** Every byte of the database file and its WAL. */
function fileBytes(path: string): Buffer {
  const files = [path, `${path}-wal`].filter((f) => existsSync(f));
  return Buffer.concat(files.map((f) => readFileSync(f)));
}

function runtimeOver(store: Store, opts: Partial<RuntimeOptions> = {}) {
  return createRuntime({
    store,
    pollIntervalMs: 20,
    features: { continueAsNew: true },
    ...opts,
  }).registerFlow(carryFlow);
}

/** The key material's distinctive part (the base64 after the last `:`). */
async function keyBytes(store: Store, subject: string): Promise<string> {
  const material = await store.getKey(subjectKeyId(subject));
  if (!material) throw new Error(`no key for ${subject}`);
  return material.slice(material.lastIndexOf(":") + 1);
}

describe("security: erasure leaves none of the subject's data (issue 22)", () => {
  it("X5: a resume payload carried by continueAsNew leaves no byte in the SQLite file or its WAL (no codec)", async () => {
    const path = freshPath();
    const r = runtimeOver(sqliteStore(path), { snapshotEvery: 1 });
    try {
      const secret = `CAROL-${randomUUID()}`;
      await carryResumePayload(r, "c", "carol", secret);
      const erasure = await r.eraseSubject("carol");
      expect(erasure.executions.sort()).toEqual(["c", "c~1"]);
      expect(fileBytes(path).includes(secret)).toBe(false);
      // The redacted state still says what the log was: its end, owner and chain.
      expect(await r.getState("c~1")).toMatchObject({
        status: "completed",
        _erased: ["carol"],
        _chain: { chainId: "c", generation: 1, continuedFrom: { executionId: "c" } },
      });
    } finally {
      await r.close();
    }
    expect(fileBytes(path).includes("CAROL-")).toBe(false);
  });

  it("X5: with a codec, the redacted snapshot opened with the codec's key holds no carried payload", async () => {
    const codec = aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" });
    const store = sqliteStore(freshPath());
    const r = runtimeOver(store, { codec, snapshotEvery: 1 });
    try {
      const secret = `CAROL-${randomUUID()}`;
      await carryResumePayload(r, "c", "carol", secret);
      await r.eraseSubject("carol");
      for (const id of ["c", "c~1"]) {
        // The sealing store opens the snapshot with the codec's key: what a key holder reads.
        const snapshot = await r.store.loadSnapshot(id);
        expect(snapshot).toBeDefined();
        expect(JSON.stringify(snapshot)).not.toContain(secret);
      }
    } finally {
      await r.close();
    }
  });

  it("X5a: the redaction keeps only what it names: a field it does not know, or one nested in a known one, is not kept", () => {
    const leaked = "SUBJECT-DATA";
    const state = {
      executionId: "x",
      seq: 3,
      status: "completed",
      flow: "f",
      flowVersion: "1",
      fingerprint: "fp",
      startedAt: 1,
      updatedAt: 2,
      frames: {},
      order: {},
      inFlight: 0,
      openWaits: 0,
      _decisions: {},
      _resumePayloads: [leaked],
      _openSuspends: [],
      _principal: "p1",
      _subject: "s",
      _resources: { costUsd: 1, note: leaked },
      _chain: {
        chainId: "x0",
        generation: 1,
        continuedFrom: {
          executionId: "x0",
          carried: { resources: { ms: 5 }, resumePayloads: [leaked], future: leaked },
        },
        future: leaked,
      },
      _parent: { executionId: "p", chainId: "p", callId: "k#0", detached: false, note: leaked },
      _children: {
        "x::k#0": {
          callId: "k#0",
          flow: "g",
          detached: false,
          outcome: { status: "completed", output: leaked, resources: { ms: 1 } },
        },
      },
      _future: leaked,
    } as unknown as ExecutionState;
    const out = redactedState(state);
    expect(JSON.stringify(out)).not.toContain(leaked);
    expect(out).toMatchObject({
      executionId: "x",
      status: "completed",
      _principal: "p1",
      _resources: { costUsd: 1 },
      _chain: {
        chainId: "x0",
        generation: 1,
        continuedFrom: { carried: { resources: { ms: 5 } } },
      },
      _children: { "x::k#0": { outcome: { status: "completed", resources: { ms: 1 } } } },
    });
    expect(out._subject).toBeUndefined();
  });

  it("K2: with a reader holding an older snapshot, erasure does not claim keyDestroyed while the key is in the files; once it ends, a second erasure scrubs it", async () => {
    const path = freshPath();
    const store = sqliteStore(path, { busyTimeoutMs: 100 });
    const r = runtimeOver(store);
    const reader = new Database(path, { readonly: true });
    try {
      await carryResumePayload(r, "c", "carol", `CAROL-${randomUUID()}`);
      const key = await keyBytes(store, "carol");
      // Another process's reader (a dashboard, a backup, a sqlite3 shell) in a read transaction.
      reader.exec("BEGIN");
      reader.prepare("SELECT count(*) FROM keys").get();
      const erasure = await r.eraseSubject("carol");
      expect(fileBytes(path).includes(key)).toBe(true);
      expect(erasure.keyDestroyed).toBe(false);
      expect(erasure.keyUnconfirmed).toMatch(/reader/);
      reader.exec("COMMIT");
      const again = await r.eraseSubject("carol");
      expect(again.keyUnconfirmed).toBeUndefined();
      expect(fileBytes(path).includes(key)).toBe(false);
    } finally {
      if (reader.inTransaction) reader.exec("ROLLBACK");
      reader.close();
      await r.close();
    }
  });

  it("X6: loom erase-subject prints that the key is not confirmed gone, and exits 1, while a reader holds the WAL", async () => {
    const path = freshPath();
    const store = sqliteStore(path);
    const r = runtimeOver(store);
    await carryResumePayload(r, "c", "carol", `CAROL-${randomUUID()}`);
    const key = await keyBytes(store, "carol");
    await r.close();
    const lines = { out: [] as string[], err: [] as string[] };
    const io: Io = {
      out: (t) => void lines.out.push(t),
      err: (t) => void lines.err.push(t),
      cwd: process.cwd(),
      debug: false,
    };
    const cmd = { name: "erase-subject", db: path, subject: "carol", json: false } as const;
    const reader = new Database(path, { readonly: true });
    try {
      reader.exec("BEGIN");
      reader.prepare("SELECT count(*) FROM keys").get();
      expect(await eraseSubjectCommand(cmd, io)).toBe(1);
      expect(lines.out.join("\n")).toMatch(/^key\s+deleted, but NOT confirmed gone .*reader/m);
      expect(lines.err.join("\n")).toMatch(/carol .*could not be confirmed gone.*erase again/);
      expect(fileBytes(path).includes(key)).toBe(true);
      reader.exec("COMMIT");
      lines.out.length = 0;
      expect(await eraseSubjectCommand(cmd, io)).toBe(0);
      expect(lines.out.join("\n")).toMatch(/^key\s+none left to destroy/m);
      expect(fileBytes(path).includes(key)).toBe(false);
    } finally {
      if (reader.inTransaction) reader.exec("ROLLBACK");
      reader.close();
    }
  });
});
