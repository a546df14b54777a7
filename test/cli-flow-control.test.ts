/**
 * `loom ls` shows what waits, and why (issue 26 item 4; cli/format-waits.ts, cli/flow-limits-env.ts
 * FL1, runtime/verbs-flow-control.ts FV1..FV4): the real CLI in a child process on a database an
 * in-process runtime filled. `--status queued` adds QUEUE, KEY, POS and EXPECTED; a listing of
 * any status a WAITING column for a call waiting on a rate limiter and for a queued execution;
 * `--json` a `waiting` field. The limits come from LOOM_QUEUES and LOOM_RATE_LIMITS: without
 * them `loom ls` still shows the places, and "-" for the waits it cannot estimate.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { QUEUES, RATE_LIMITS, waitingExecutions, type Waiting } from "./support/waiting.ts";
import { start, tempDirs, type Result } from "./fixtures/cli/spawn.ts";

const tempDir = tempDirs("loom-cli-fc-");
const open: Waiting[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((w) => w.close()));
});

const ENV = { LOOM_QUEUES: JSON.stringify(QUEUES), LOOM_RATE_LIMITS: JSON.stringify(RATE_LIMITS) };

/** test/support/waiting.ts's executions, in the database `loom` opens in `cwd`. */
async function filled(cwd: string): Promise<void> {
  open.push(await waitingExecutions(sqliteStore(join(cwd, "loom.db"))));
}

const ls = async (cwd: string, args: string[], env: Record<string, string> = ENV) => {
  const result: Result = await start(cwd, ["ls", ...args], env).exited;
  expect(result.stderr).toBe("");
  expect(result.code).toBe(0);
  return result.stdout.trimEnd().split("\n");
};

/** The cells of a table line (columns are two or more spaces apart). */
const cells = (line: string | undefined): string[] => (line ?? "").split(/ {2,}/);

describe("loom ls shows what waits (issue 26 item 4)", () => {
  it("FV1, FE1: --status queued shows QUEUE, KEY, POS (admission order) and EXPECTED; WAITING for the rest; --json a waiting field", async () => {
    const cwd = tempDir();
    await filled(cwd);
    const queued = await ls(cwd, ["--status", "queued", "--sort", "created"]);
    const head = cells(queued[0]);
    expect(head).toEqual(expect.arrayContaining(["QUEUE", "KEY", "POS", "EXPECTED"]));
    const at = (name: string) => head.indexOf(name);
    const rows = new Map(queued.slice(1).map((l) => [cells(l)[0], cells(l)]));
    // Concurrency 1 held by run-2, one of key u1 at a time, a slot held ~12 s: q-5 (priority -1)
    // first, then q-3 behind it on u1, then q-4 behind both in the queue.
    for (const [id, key, pos, expected] of [
      ["q-5", "u1", "1", "~12 s"],
      ["q-3", "u1", "2", "~24 s"],
      ["q-4", "u2", "3", "~36 s"],
    ]) {
      const row = rows.get(id);
      expect([at("QUEUE"), at("KEY"), at("POS"), at("EXPECTED")].map((i) => row?.[i])).toEqual([
        "fc",
        key,
        pos,
        expected,
      ]);
    }
    const all = await ls(cwd, []);
    const waiting = cells(all[0]).indexOf("WAITING");
    expect(waiting).toBeGreaterThan(0);
    const line = (id: string) => cells(all.find((l) => l.startsWith(`${id} `)));
    // FE3: 60 of 100 in the window, ~60 asked: 20 to free at 100 a minute.
    expect(line("ask-b")[waiting]).toBe("limiter m #1 ~12 s");
    expect(line("q-3")[waiting]).toBe("queue fc (key u1) #2 ~24 s");
    expect(line("run-2")[waiting]).toBe("-");
    const json = JSON.parse((await ls(cwd, ["--json"])).join("\n")) as {
      executionId: string;
      waiting?: unknown;
    }[];
    const byId = new Map(json.map((x) => [x.executionId, x.waiting]));
    expect(byId.get("q-4")).toEqual({
      kind: "queue",
      queue: "fc",
      key: "u2",
      position: 3,
      waitingCount: 3,
      expectedWaitMs: expect.any(Number) as number,
    });
    expect(byId.get("ask-b")).toMatchObject({ kind: "limiter", limiter: "m", position: 1 });
    expect(byId.get("done-1")).toBeUndefined();
  });

  it("FV2, FL1: without LOOM_QUEUES the places show and the waits are unknown; a malformed one is a usage error", async () => {
    const cwd = tempDir();
    await filled(cwd);
    const queued = await ls(cwd, ["--status", "queued"], {});
    const head = cells(queued[0]);
    const q5 = cells(queued.find((l) => l.startsWith("q-5 ")));
    expect([q5[head.indexOf("POS")], q5[head.indexOf("EXPECTED")]]).toEqual(["1", "-"]);
    const bad = await start(cwd, ["ls"], { LOOM_QUEUES: '{"fc":{"concurrency":0}}' }).exited;
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^loom: LOOM_QUEUES: .*concurrency/);
  });
});
