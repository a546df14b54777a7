/**
 * S1 under a real crash: a process appending large batches to a SQLite file is killed with
 * SIGKILL at seeded random moments; after each kill the log holds whole batches only, dense
 * from 0, and the file opens and appends again.
 */
import { spawn } from "./support/processes.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { mulberry32 } from "./helpers.ts";

const BATCH = 2000;
const worker = join(import.meta.dirname, "fixtures", "store", "append-forever.ts");
const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-crash-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function runAndKill(path: string, afterReadyMs: number): Promise<void> {
  const child = spawn(process.execPath, ["--import", "tsx", worker, path], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stderr.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`worker exited early (${code})`)));
  });
  await new Promise((r) => setTimeout(r, afterReadyMs));
  const exited = new Promise((r) => child.on("exit", r));
  child.kill("SIGKILL");
  await exited;
}

describe("SQLite store under SIGKILL", () => {
  it("keeps whole batches only, across 8 kills at seeded moments", async () => {
    const path = join(dir, "crash.db");
    const random = mulberry32(7);
    let previous = 0;
    for (let kill = 0; kill < 8; kill++) {
      await runAndKill(path, Math.floor(random() * 120));
      const store = sqliteStore(path);
      const events = await store.read("x");
      await store.close();
      expect(events.length % BATCH, `kill ${kill}: ${events.length} events`).toBe(0);
      expect(events.every((e, i) => e.seq === i)).toBe(true);
      expect(events.length, `kill ${kill}: the log grew`).toBeGreaterThan(previous);
      previous = events.length;
    }
  });
});
