/**
 * W1 across processes: two `loom worker` processes on one SQLite file compete for the same
 * executions; no execution is ever driven by both at once, and each completes exactly once.
 */
import type { ChildProcess } from "node:child_process";
import { spawn } from "./support/processes.ts";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createRuntime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { counted } from "./fixtures/workers/flows.ts";
import { until } from "./helpers.ts";
import { slow } from "./support/slowdown.ts";

const root = join(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "loom-two-workers-"));
const db = join(dir, "loom.db");
const ledger = join(dir, "ledger.txt");
const workers: ChildProcess[] = [];
afterAll(() => {
  for (const w of workers) w.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

function startWorker(): ChildProcess {
  const child = spawn(
    process.execPath,
    [
      join(root, "bin", "loom.js"),
      "worker",
      join(root, "test/fixtures/workers/flows.ts"),
      "--db",
      db,
      "--max-active",
      "3",
    ],
    { env: { ...process.env, LOOM_TEST_LEDGER: ledger }, stdio: ["ignore", "ignore", "pipe"] },
  );
  workers.push(child);
  return child;
}

describe("two loom worker processes on one SQLite file", () => {
  it("never drive one execution at once, and finish each exactly once", async () => {
    writeFileSync(ledger, "");
    const setup = createRuntime({ store: sqliteStore(db), background: false }).registerFlow(
      counted,
    );
    const ids = Array.from({ length: 12 }, (_, i) => `c${i}`);
    for (const id of ids) await setup.start(counted, { steps: 6 }, { id });
    await until(async () => (await setup.list({ status: ["parked"] })).length === ids.length);
    await setup.close();

    const ready = [startWorker(), startWorker()].map(
      (w) =>
        new Promise<void>((r) => w.stderr?.on("data", (d: Buffer) => d.includes("running") && r())),
    );
    await Promise.all(ready);
    const client = createRuntime({ store: sqliteStore(db), background: false });
    for (const id of ids) await client.resume(id, null);
    for (const id of ids) {
      expect(await client.waitForCompletion(id, { timeoutMs: slow(30_000) })).toEqual({
        status: "completed",
        output: 15,
      });
      const done = (await client.readLog(id)).filter((e) => e.kind === "STEP_COMPLETED");
      expect(done.map((e) => (e.payload as { callId: string }).callId)).toEqual(
        Array.from({ length: 6 }, (_, i) => `work#${i}`),
      );
    }
    await client.close();

    const rows = readFileSync(ledger, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split(" "));
    const pids = new Set(rows.map((r) => r[2]));
    expect(pids.size, "both workers drove something").toBe(2);
    for (const id of ids) {
      const spans = rows
        .filter((r) => r[0] === id)
        .map((r) => ({ pid: r[2], start: Number(r[3]), end: Number(r[4]) }));
      for (const a of spans) {
        for (const b of spans) {
          const overlap = a.start < b.end && b.start < a.end;
          expect(a.pid !== b.pid && overlap, `${id}: ${a.pid} and ${b.pid} at once`).toBe(false);
        }
      }
    }
  });
});
