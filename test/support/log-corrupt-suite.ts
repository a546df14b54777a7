/**
 * Issue 21 item 3, on every SQL store: a log with a row that no longer parses is quarantined, not
 * fatal. Recovery, `loom worker` and `list` go on with every other execution; `getState`,
 * `readLog` and `loom show` raise LogCorruptError naming the execution and the sequence; `loom ls`
 * shows the corrupt one with its error. Each store's test file opens a store and says how to
 * spoil one stored payload.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createRuntime } from "../../src/index.ts";
import type { Store } from "../../src/store/spi.ts";
import { listPage } from "../../src/ui/list.ts";
import { quick } from "../fixtures/fleet/flows.ts";
import { until } from "../helpers.ts";

const BIN = fileURLToPath(new URL("../../bin/loom.js", import.meta.url));
const FLOWS = fileURLToPath(new URL("../fixtures/fleet/flows.ts", import.meta.url));

export interface CorruptPlace {
  store: Store;
  /** Sets the stored payload of `id`'s event `seq` to text that is not JSON. */
  spoil(id: string, seq: number): Promise<void>;
  /** The `loom` flags that name this store (`--db PATH`, or `--pg URL --pg-schema S`). */
  flags: string[];
  /** Closes the store and removes what the place holds. */
  dispose(): Promise<void>;
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function loom(args: string[]): Ran & { kill(): void; exited: Promise<Ran>; err(): string } {
  const child = spawn(process.execPath, [BIN, ...args]);
  const got = { stdout: "", stderr: "" };
  child.stdout.on("data", (b: Buffer) => (got.stdout += b.toString()));
  child.stderr.on("data", (b: Buffer) => (got.stderr += b.toString()));
  const exited = new Promise<Ran>((resolve) =>
    child.on("close", (code) => resolve({ code, ...got })),
  );
  return {
    code: null,
    ...got,
    kill: () => child.kill("SIGTERM"),
    exited,
    err: () => got.stderr,
  };
}

const LOG_CORRUPT = (id: string, seq: number) => ({
  name: "LogCorruptError",
  code: "LOOM_LOG_CORRUPT",
  details: { executionId: id, seq },
});

export function logCorruptSuite(name: string, open: () => Promise<CorruptPlace>): void {
  describe(`an unreadable log row on ${name} (issue 21 item 3)`, () => {
    it("recovery drives zz past aa's unreadable row; getState and readLog name aa and the seq", async () => {
      const place = await open();
      const runtime = createRuntime({
        store: place.store,
        background: false,
        closeStore: false,
      }).registerFlow(quick);
      try {
        await runtime.start(quick, { steps: 2 }, { id: "aa", drive: false });
        await runtime.start(quick, { steps: 2 }, { id: "zz", drive: false });
        await place.spoil("aa", 0);

        const recovered = await runtime.recoverAbandoned();
        expect(recovered).toEqual(["zz"]);
        await until(async () => (await runtime.list({ status: ["completed"] })).length === 1);
        await expect(runtime.getState("aa")).rejects.toMatchObject(LOG_CORRUPT("aa", 0));
        await expect(runtime.readLog("aa")).rejects.toMatchObject(LOG_CORRUPT("aa", 0));
        // Listed still, and the dashboard's page says what is wrong with it.
        const listed = await runtime.list();
        expect(listed.map((x) => x.executionId)).toEqual(["aa", "zz"]);
        const page = await listPage(runtime.store, new URLSearchParams(), 0);
        expect(page.executions.map((x) => x.error?.code)).toEqual(["LOOM_LOG_CORRUPT", undefined]);
        expect(page.executions[0]?.error).toMatchObject(LOG_CORRUPT("aa", 0));
        // Quarantined: reported once, and a second recovery does not try it again.
        expect(await runtime.recoverAbandoned()).toEqual([]);
      } finally {
        await runtime.close();
        await place.dispose();
      }
    });

    it("loom worker drives 99 of 100 pending executions, and loom ls and show name the corrupt one", async () => {
      const place = await open();
      const client = createRuntime({
        store: place.store,
        background: false,
        closeStore: false,
      }).registerFlow(quick);
      const ids = Array.from({ length: 100 }, (_, i) => `p-${String(i).padStart(3, "0")}`);
      let worker: ReturnType<typeof loom> | undefined;
      try {
        for (const id of ids) await client.start(quick, { steps: 1 }, { id, drive: false });
        await place.spoil("p-042", 0);

        worker = loom(["worker", FLOWS, ...place.flags]);
        const done = async () => (await client.list({ status: ["completed"] })).length === 99;
        await until(done, 30_000);
        expect((await client.list({ status: ["pending"] })).map((x) => x.executionId)).toEqual([
          "p-042",
        ]);

        const ls = await loom(["ls", ...place.flags]).exited;
        expect(ls.code).toBe(0);
        const row = ls.stdout.split("\n").find((l) => l.startsWith("p-042"));
        expect(row).toContain("LogCorruptError");
        const lsJson = await loom(["ls", ...place.flags, "--json"]).exited;
        const rows = JSON.parse(lsJson.stdout) as { executionId: string; error?: unknown }[];
        expect(rows.find((r) => r.executionId === "p-042")?.error).toMatchObject(
          LOG_CORRUPT("p-042", 0),
        );
        expect(rows.filter((r) => r.error !== undefined)).toHaveLength(1);

        const show = await loom(["show", "p-042", ...place.flags]).exited;
        expect(show.code).toBe(1);
        expect(show.stderr).toContain("LOOM_LOG_CORRUPT");
        expect(show.stderr).toContain('"p-042" cannot be read at seq 0');

        worker.kill();
        const stopped = await worker.exited;
        expect(stopped.code).toBe(0);
        expect(stopped.stderr).toContain("LOOM_LOG_CORRUPT");
      } finally {
        worker?.kill();
        await client.close();
        await place.dispose();
      }
    });
  });
}
