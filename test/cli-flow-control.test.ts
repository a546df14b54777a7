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
import { createRuntime, flow$, type Effect, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { offsetClock, until } from "./helpers.ts";
import { start, tempDirs, type Result } from "./fixtures/cli/spawn.ts";

const tempDir = tempDirs("loom-cli-fc-");
const open: Runtime[] = [];
const gates = new Map<string, () => void>();
afterEach(async () => {
  for (const go of gates.values()) go();
  gates.clear();
  await Promise.all(open.splice(0).map((r) => r.close()));
});

const hold = (id: string) => new Promise<void>((resolve) => gates.set(id, resolve));
const QUEUES = { fc: { concurrency: 1, keyConcurrency: 1 } };
const RATE_LIMITS = { m: { outputTpm: 100 } };
const ENV = { LOOM_QUEUES: JSON.stringify(QUEUES), LOOM_RATE_LIMITS: JSON.stringify(RATE_LIMITS) };

const work = flow$(
  "fc-work",
  async (ctx, input: { id: string; user: string }) => ctx.run("work", () => hold(input.id)),
  { queue: { name: "fc", key: (i: { user: string }) => i.user } },
);
const model: Effect<{ id: string }, string> = {
  name: "model",
  limiter: () => ({ name: "m", inputTokens: 0, outputTokens: 60 }),
  async run(c, ectx) {
    await hold(c.id);
    ectx.meter({ tokens: { input: 0, output: 60 } });
    return c.id;
  },
};
const ask = flow$("fc-ask", async (ctx, c: { id: string }) =>
  ctx.execute(model, c, { retry: false }),
);

/**
 * One execution of queue fc held its slot 12 s (a moved clock), `run-2` holds it now, and three
 * wait: q-5 (u1, priority -1), q-3 (u1), q-4 (u2). On limiter m (100 output tokens a minute),
 * `ask-a` holds 60 and `ask-b` waits for its 60.
 */
async function filled(cwd: string): Promise<void> {
  const clock = offsetClock();
  const r = createRuntime({
    store: sqliteStore(join(cwd, "loom.db")),
    clock,
    pollIntervalMs: 20,
    queues: QUEUES,
    rateLimits: RATE_LIMITS,
  });
  open.push(r);
  r.registerFlow(work).registerFlow(ask);
  const done = await r.start(work, { id: "done-1", user: "u0" }, { id: "done-1" });
  await until(() => gates.has("done-1"));
  clock.advance(12_000);
  gates.get("done-1")?.();
  await done.result();
  await r.start(work, { id: "run-2", user: "u1" }, { id: "run-2" });
  await until(() => gates.has("run-2"));
  await r.start(work, { id: "q-3", user: "u1" }, { id: "q-3" });
  await r.start(work, { id: "q-4", user: "u2" }, { id: "q-4" });
  await r.start(work, { id: "q-5", user: "u1" }, { id: "q-5", priority: -1 });
  await r.start(ask, { id: "ask-a" }, { id: "ask-a" });
  await until(() => gates.has("ask-a"));
  await r.start(ask, { id: "ask-b" }, { id: "ask-b" });
  await until(async () => (await r.limiters())[0]?.waiting.length === 1);
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
