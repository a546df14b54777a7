/**
 * The `loom` command, end to end: every test spawns the real CLI (`node bin/loom.js`) in a temp
 * directory holding its database, against the flows in test/fixtures/cli/flows.ts (helpers in
 * test/fixtures/cli/spawn.ts). Each spawn costs about half a second of tsx start-up, so the error
 * cases run concurrently, and a test that only needs executions to exist makes them in process.
 *
 * Every verb, and the test that runs it in a child process:
 *
 * | verb          | file: test                                                                   |
 * | ------------- | ---------------------------------------------------------------------------- |
 * | run           | here: "prints the outcome as JSON ...", "reports each step, retry, ..."      |
 * | worker        | here: "a worker recovers ..."; cli-send-fork-ui: "fork records a copy ..."   |
 * | ls            | here: "ls lists executions ...", "ls filters by --flow and pages ..."        |
 * | show          | here: "show prints the folded state ...", "show --json prints ..."           |
 * |               | cli-show-calls.test.ts: "--step prints a call in full ...", "--llm ..."      |
 * | resume        | here: "a parked run says how to resume it ..."                               |
 * | serve         | remote.test.ts: "loom serve: prints its URL, answers /health ..."            |
 * | cancel        | here: "loom cancel stops a running loom run and records why"                 |
 * | schedules     | here: "lists the stored schedules ...", "pause and resume a schedule ..."   |
 * | verify        | cli-trust.test.ts: the three tests of "loom verify"                          |
 * | erase-subject | cli-trust.test.ts: the two tests of "loom erase-subject"                     |
 * | send          | cli-send-fork-ui.test.ts: "send posts to the inbox a loom run receives ..."  |
 * | fork          | cli-send-fork-ui.test.ts: "fork records a copy a worker drives on, ..."      |
 * | ui            | cli-send-fork-ui.test.ts: "loom ui serves the executions until SIGTERM; ..." |
 * |               | cli-show-calls.test.ts: "registers the module's flows: ..." (--module)       |
 *
 * On PostgreSQL, test/cli-postgres.pg.test.ts runs worker, ls and show with `--pg`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createRuntime, flow$, step$ } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { counts, twoSteps } from "./fixtures/cli/flows.ts";
import {
  FLOWS,
  fixture,
  loom,
  oneErrorLine,
  showJson,
  start,
  tempDirs,
  until,
} from "./fixtures/cli/spawn.ts";

const tempDir = tempDirs("loom-cli-");

describe("loom run, ls and show", () => {
  it("prints the outcome as JSON; the same --id and input is the same execution (W5)", async () => {
    const cwd = tempDir();
    const args = ["run", FLOWS, "two-steps", "--input", '{"name":"ada"}', "--id", "greet-1"];
    const first = await loom(cwd, ...args);
    expect(first.code).toBe(0);
    // Progress on stderr, one line per step as it ends; stdout holds the outcome alone.
    expect(first.stderr).toMatch(
      /^ {2}step greet#0 completed in \d+ ms\n {2}step measure#0 completed in \d+ ms\n$/,
    );
    expect(JSON.parse(first.stdout)).toEqual({
      id: "greet-1",
      status: "completed",
      output: { greeting: "hello ada", length: 9 },
    });
    const before = await showJson(cwd, "greet-1");
    expect(before.events.map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "STEP_COMPLETED",
      "STEP_COMPLETED",
      "EXECUTION_COMPLETED",
    ]);

    const again = await loom(cwd, ...args);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(first.stdout);
    expect(again.stderr).toBe(""); // Nothing new happened: no progress.
    const after = await showJson(cwd, "greet-1");
    expect(after.events).toEqual(before.events);
    expect(after.state.output).toEqual({ greeting: "hello ada", length: 9 });
  });

  it("ls lists executions with their status and filters by --status", async () => {
    const cwd = tempDir();
    const ok = await loom(
      cwd,
      "run",
      FLOWS,
      "two-steps",
      "--input",
      '{"name":"x"}',
      "--id",
      "ok-1",
    );
    expect(ok.code).toBe(0);
    const failed = await loom(cwd, "run", FLOWS, "fails", "--id", "bad-1", "--quiet");
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({
      status: "failed",
      error: { message: "boom" },
    });
    // --quiet: no progress, so the failure is the one line on stderr.
    expect(oneErrorLine(failed)).toBe(
      'loom: execution "bad-1" failed: LOOM_APPLICATION Error: boom',
    );

    const all = await loom(cwd, "ls");
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/^bad-1\s+fails\s+failed\s+3\s/m);
    expect(all.stdout).toMatch(/^ok-1\s+two-steps\s+completed\s+4\s+\S+\s+-$/m);

    const completed = await loom(cwd, "ls", "--status", "completed");
    expect(completed.stdout).toContain("ok-1");
    expect(completed.stdout).not.toContain("bad-1");

    const some = await loom(cwd, "ls", "--status", "parked,failed", "--json");
    expect(some.code).toBe(0);
    const rows = JSON.parse(some.stdout) as { executionId: string; status: string }[];
    expect(rows.map((r) => [r.executionId, r.status])).toEqual([["bad-1", "failed"]]);
  });

  it("show prints the folded state and a timeline naming the steps", async () => {
    const cwd = tempDir();
    const ran = await loom(
      cwd,
      "run",
      FLOWS,
      "two-steps",
      "--input",
      '{"name":"bo"}',
      "--id",
      "s-1",
    );
    expect(ran.code).toBe(0);
    const shown = await loom(cwd, "show", "s-1");
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^status\s+completed$/m);
    expect(shown.stdout).toMatch(/^flow\s+two-steps \(version 1/m);
    expect(shown.stdout).toContain("timeline (4 events)");
    expect(shown.stdout).toMatch(/STEP_COMPLETED\s+step greet#0 -> "hello bo"/);
    expect(shown.stdout).toMatch(/STEP_COMPLETED\s+step measure#0 -> 8/);
    expect(shown.stdout).toMatch(/EXECUTION_COMPLETED\s+completed -> /);
  });

  it("show --json prints { state, events }: the folded state and the log's envelopes", async () => {
    const cwd = tempDir();
    expect(
      (await loom(cwd, "run", FLOWS, "two-steps", "--input", '{"name":"jo"}', "--id", "j-1")).code,
    ).toBe(0);
    const shown = await loom(cwd, "show", "j-1", "--json");
    expect(shown).toMatchObject({ code: 0, stderr: "" });
    const json = JSON.parse(shown.stdout) as Record<string, unknown>;
    // No chain, no children: exactly these two keys (docs/cli.md, "loom show").
    expect(Object.keys(json).sort()).toEqual(["events", "state"]);
    expect(json.state).toMatchObject({
      executionId: "j-1",
      flow: "two-steps",
      flowVersion: "1",
      status: "completed",
      input: { name: "jo" },
      output: { greeting: "hello jo", length: 8 },
      // Steps that completed plainly are kept by their value (schema 1.13.0, fold/settled.ts L1).
      frames: {},
      _settled: { step: { "greet#0": "hello jo", "measure#0": 8 } },
    });
    const events = json.events as Record<string, unknown>[];
    expect(events.map((e) => [e.seq, e.kind])).toEqual([
      [0, "EXECUTION_STARTED"],
      [1, "STEP_COMPLETED"],
      [2, "STEP_COMPLETED"],
      [3, "EXECUTION_COMPLETED"],
    ]);
    for (const e of events) {
      expect(e).toMatchObject({ executionId: "j-1", at: expect.any(Number) as number });
      expect(e).toHaveProperty("payload");
    }
    expect(events[1]?.payload).toMatchObject({ callId: "greet#0", output: "hello jo" });
  });

  it("ls filters by --flow and pages with --limit and --after", async () => {
    const cwd = tempDir();
    const runtime = createRuntime({ store: sqliteStore(join(cwd, "loom.db")), background: false });
    for (const id of ["l-1", "l-2", "l-3"]) {
      await (await runtime.start(twoSteps, { name: id }, { id })).result();
    }
    for (const id of ["l-4", "l-5"]) await (await runtime.start(counts, 0, { id })).result();
    await runtime.close();

    const [byFlow, page1, page2, last, both, badLimit] = await Promise.all([
      loom(cwd, "ls", "--flow", "counts", "--json"),
      loom(cwd, "ls", "--limit", "2"),
      loom(cwd, "ls", "--limit", "2", "--after", "l-2", "--json"),
      loom(cwd, "ls", "--after", "l-4"),
      loom(cwd, "ls", "--flow", "two-steps", "--status", "completed", "--limit", "2", "--json"),
      loom(cwd, "ls", "--limit", "0"),
    ]);
    const ids = (r: { stdout: string }): string[] =>
      (JSON.parse(r.stdout) as { executionId: string }[]).map((x) => x.executionId);
    expect(ids(byFlow)).toEqual(["l-4", "l-5"]);
    // A page that is not the last says on stderr how to get the next one.
    expect(page1.code).toBe(0);
    expect(
      page1.stdout
        .trimEnd()
        .split("\n")
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(["ID", "l-1", "l-2"]);
    expect(page1.stderr).toBe("loom: more follow: loom ls --limit 2 --after l-2\n");
    expect(ids(page2)).toEqual(["l-3", "l-4"]);
    expect(page2.stderr).toBe(""); // --json: the array only.
    expect(last.stdout).toMatch(/^l-5\s+counts\s+completed\s+5\s/m);
    expect(last.stdout).not.toMatch(/^l-4/m);
    expect(last.stderr).toBe("");
    expect(ids(both)).toEqual(["l-1", "l-2"]);
    expect(badLimit.code).toBe(2);
    expect(oneErrorLine(badLimit)).toBe('loom: --limit needs a whole number >= 1, got "0"');
  });

  it("ls filters by --principal, sorts by --sort cost (highest first) and shows COST and TOKENS", async () => {
    const cwd = tempDir();
    const paid = step$("paid", async (usd: number, ectx) => {
      ectx.meter({ costUsd: usd, tokens: { input: 7, output: 3 } });
      return usd;
    });
    const spends = flow$("spends", async (ctx, usd: number) => ctx.execute(paid, usd));
    const runtime = createRuntime({ store: sqliteStore(join(cwd, "loom.db")), background: false });
    await (await runtime.start(spends, 0.002, { id: "p-1", principal: "alice" })).result();
    await (await runtime.start(spends, 0.5, { id: "p-2", principal: "bob" })).result();
    await (await runtime.start(spends, 0.01, { id: "p-3", principal: "alice" })).result();
    await runtime.close();

    const [byCost, alice, badSort, sortAfter] = await Promise.all([
      loom(cwd, "ls", "--sort", "cost"),
      loom(cwd, "ls", "--principal", "alice", "--json"),
      loom(cwd, "ls", "--sort", "price"),
      loom(cwd, "ls", "--sort", "cost", "--after", "p-1"),
    ]);
    const lines = byCost.stdout.trimEnd().split("\n");
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual(["ID", "p-2", "p-3", "p-1"]);
    expect(lines[0]).toMatch(/COST\s+TOKENS$/);
    expect(lines[1]).toMatch(/\$0\.5\d*\s+10$/);
    const rows = JSON.parse(alice.stdout) as { executionId: string; principal: string }[];
    expect(rows.map((r) => [r.executionId, r.principal])).toEqual([
      ["p-1", "alice"],
      ["p-3", "alice"],
    ]);
    expect(badSort.code).toBe(2);
    expect(oneErrorLine(badSort)).toContain("--sort needs one of id, created, updated, cost");
    expect(sortAfter.code).toBe(2);
    expect(oneErrorLine(sortAfter)).toContain("--after pages the id order");
  });
});

describe("loom run's progress", () => {
  it("reports each step, retry, sleep and wait on stderr as it happens; --quiet reports nothing", async () => {
    const cwd = tempDir();
    const run = start(cwd, ["run", FLOWS, "naps", "--id", "nap-1"]);
    await until("the wait", () => run.stderr().includes("suspend#0 waiting for a resume"));
    // Before the outcome, as it happens: the steps so far are on stderr already.
    expect(run.stderr()).toMatch(
      new RegExp(
        [
          "^ {2}step before#0 completed in \\d+ ms",
          " {2}sleep#0 sleeping \\d+ ms", // what is left of the 20 ms when it parks
          " {2}sleep#0 woke",
          " {2}step flaky#0 attempt 1 failed in \\d+ ms: Error: first try; retrying in \\d+ ms",
          " {2}step flaky#0 completed in \\d+ ms",
          " {2}suspend#0 waiting for a resume\n",
        ].join("\n"),
      ),
    );
    expect(run.stdout()).toBe("");
    expect((await loom(cwd, "resume", "nap-1", '"ok"')).code).toBe(0);
    const ended = await run.exited;
    expect(ended.code).toBe(0);
    expect(ended.stderr).toMatch(/^ {2}resumed$/m);
    expect(JSON.parse(ended.stdout)).toEqual({
      id: "nap-1",
      status: "completed",
      output: { answer: "ok" },
    });

    const quiet = await loom(cwd, "run", FLOWS, "two-steps", "--input", '{"name":"q"}', "--quiet");
    expect(quiet).toMatchObject({ code: 0, stderr: "" });
    expect(JSON.parse(quiet.stdout)).toMatchObject({ status: "completed" });
  });
});

describe("chains on the command line (ADR 0109)", () => {
  it("with LOOM_FEATURES=continueAsNew, run follows a chain to the generation that ends it", async () => {
    const cwd = tempDir();
    const chains = { LOOM_FEATURES: "continueAsNew" };
    const ran = await start(cwd, ["run", FLOWS, "rotates", "--id", "rot"], chains).exited;
    expect(ran.code).toBe(0);
    expect(ran.stderr).toContain('execution "rot" continued as "rot~1"');
    expect(ran.stderr).toContain('execution "rot" continued as "rot~2"');
    expect(JSON.parse(ran.stdout)).toMatchObject({ status: "completed", output: { gen: 2 } });
    const [shown, json] = await Promise.all([
      loom(cwd, "show", "rot"),
      start(cwd, ["show", "rot~1", "--json"], chains).exited,
    ]);
    expect(shown.stdout).toMatch(/^chain\s+rot: 3 generations, \[rot\] -> rot~1 -> rot~2/m);
    // show --json adds `chain` for a chain member (docs/cli.md).
    expect(JSON.parse(json.stdout)).toMatchObject({
      state: { executionId: "rot~1", status: "continued" },
      chain: {
        chainId: "rot",
        head: "rot~2",
        generations: [{ executionId: "rot" }, { executionId: "rot~1" }, { executionId: "rot~2" }],
      },
    });
    // Without the flag the syscall is refused, and an unknown feature is named.
    const off = await loom(tempDir(), "run", FLOWS, "rotates");
    expect(off.code).toBe(1);
    expect(off.stderr).toContain("LOOM_CONTINUE_AS_NEW_UNAVAILABLE");
    const bad = await start(cwd, ["ls"], { LOOM_FEATURES: "nope" }).exited;
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('unknown feature "nope"');
  });
});

describe("modules", () => {
  it("loads a JavaScript module's default array of flows, and refuses one with none", async () => {
    const cwd = tempDir();
    const [echo, none] = await Promise.all([
      loom(cwd, "run", fixture("default-export.js"), "echo", "--input", "[1,2]"),
      loom(cwd, "run", fixture("no-flows.js"), "anything"),
    ]);
    expect(echo.code).toBe(0);
    expect(JSON.parse(echo.stdout)).toMatchObject({ status: "completed", output: [1, 2] });
    expect(none.code).toBe(1);
    expect(oneErrorLine(none)).toMatch(/^loom: module ".*no-flows\.js" exports no flows/);
  });
});

describe("loom schedules", () => {
  it("lists the stored schedules with their next occurrence and its id", async () => {
    const cwd = tempDir();
    const nightly = flow$("nightly", async () => "ran");
    const runtime = createRuntime({ store: sqliteStore(join(cwd, "loom.db")), background: false });
    await runtime.schedule(nightly, { cron: "0 2 * * *", name: "nightly-report" });
    await runtime.close();
    const listed = await loom(cwd, "schedules");
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^NAME\s+FLOW\s+CRON\s+TZ\s+NEXT$/m);
    expect(listed.stdout).toMatch(
      /^nightly-report\s+nightly\s+0 2 \* \* \*\s+UTC\s+\S+T02:00:00\.000Z$/m,
    );
    const json = JSON.parse((await loom(cwd, "schedules", "--json")).stdout) as {
      name: string;
      nextId: string;
    }[];
    expect(json).toHaveLength(1);
    expect(json[0]?.nextId).toMatch(/^nightly-report@\d{4}-\d\d-\d\dT02:00:00\.000Z$/);
  });

  it("pause and resume a schedule by name (schedules.ts SC4); a wrong verb is a usage error", async () => {
    const cwd = tempDir();
    const nightly = flow$("nightly", async () => "ran");
    const runtime = createRuntime({ store: sqliteStore(join(cwd, "loom.db")), background: false });
    await runtime.schedule(nightly, { cron: "0 2 * * *", name: "nightly-report" });
    await runtime.close();
    const paused = await loom(cwd, "schedules", "pause", "nightly-report");
    expect(paused.code).toBe(0);
    expect(paused.stdout.trim()).toBe("paused nightly-report");
    expect((await loom(cwd, "schedules")).stdout).toMatch(/^nightly-report\s.*\spaused$/m);
    const resumed = await loom(cwd, "schedules", "resume", "nightly-report", "--json");
    expect(JSON.parse(resumed.stdout)).toMatchObject({ name: "nightly-report", paused: false });
    const unknown = await loom(cwd, "schedules", "pause", "nope");
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('no schedule is named "nope"');
    expect((await loom(cwd, "schedules", "stop", "nightly-report")).code).not.toBe(0);
  });
});

describe("cancel from another process", () => {
  it("loom cancel stops a running loom run and records why", async () => {
    const cwd = tempDir();
    const run = start(cwd, ["run", FLOWS, "sleeps-long", "--id", "long-1"]);
    await until("the step to start", () => existsSync(join(cwd, "loom.db")));
    for (;;) {
      const shown = await loom(cwd, "show", "long-1", "--json").catch(() => undefined);
      if (shown?.code === 0 && shown.stdout.includes("STEP_STARTED")) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const t0 = Date.now();
    const cancelled = await loom(cwd, "cancel", "long-1", "--reason", "enough");
    expect(cancelled).toMatchObject({ code: 0, stdout: "cancelled long-1\n", stderr: "" });
    const result = await run.exited;
    // Before the step's 10 minutes: the cancel ended the run.
    expect(Date.now() - t0).toBeLessThan(600_000);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ id: "long-1", status: "cancelled" });
    const shown = await showJson(cwd, "long-1");
    expect(shown.events.map((e) => e.kind).slice(-2)).toEqual([
      "STEP_CANCELLED",
      "EXECUTION_CANCELLED",
    ]);
    const again = await loom(cwd, "cancel", "long-1");
    expect(again).toMatchObject({ code: 0, stdout: "long-1 had already ended (cancelled)\n" });
    const usage = await loom(cwd, "cancel");
    expect(usage.code).toBe(2);
  });
});

describe("suspend and resume across processes", () => {
  it("a parked run says how to resume it and finishes when another process resumes it", async () => {
    const cwd = tempDir();
    const db = ["--db", "custom.db"];
    const run = start(cwd, ["run", FLOWS, "wait-for-text", "--id", "chat-1", ...db]);
    await until("the parked notice", () => run.stderr().includes("is parked"));
    expect(run.stderr()).toContain("loom resume chat-1 '<JSON>' --db custom.db");

    const parked = await loom(cwd, "ls", "--status", "parked", ...db);
    expect(parked.stdout).toMatch(/^chat-1\s+wait-for-text\s+parked/m);
    const resumed = await loom(cwd, "resume", "chat-1", '{"text":"hi"}', ...db);
    expect(resumed).toMatchObject({ code: 0, stdout: "resumed chat-1\n", stderr: "" });

    const result = await run.exited;
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      id: "chat-1",
      status: "completed",
      output: { heard: "hi" },
    });
    const shown = await showJson(cwd, "chat-1", ...db);
    expect(shown.events.map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "SUSPENDED",
      "RESUMED",
      "EXECUTION_COMPLETED",
    ]);
  });

  it("a worker recovers an execution whose run process died, and stops on SIGTERM", async () => {
    const cwd = tempDir();
    const run = start(cwd, ["run", FLOWS, "wait-for-text", "--id", "orphan-1"]);
    await until("the parked notice", () => run.stderr().includes("is parked"));
    run.child.kill("SIGKILL");
    await run.exited;
    expect((await loom(cwd, "resume", "orphan-1", '{"text":"later"}')).code).toBe(0);

    const worker = start(cwd, ["worker", FLOWS]);
    await until("the worker to recover it", () => worker.stderr().includes("orphan-1"));
    expect(worker.stderr()).toContain("recovered 1 abandoned execution(s): orphan-1");
    let shown = await showJson(cwd, "orphan-1");
    for (let i = 0; i < 10 && shown.state.status !== "completed"; i++) {
      shown = await showJson(cwd, "orphan-1");
    }
    expect(shown.state).toMatchObject({ status: "completed", output: { heard: "later" } });

    worker.child.kill("SIGTERM");
    const stopped = await worker.exited;
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).toContain("loom: SIGTERM received; closing the runtime");
    expect(stopped.stderr.trimEnd().endsWith("loom: worker stopped")).toBe(true);
  });
});

describe.concurrent("errors: one line, a non-zero exit, nothing appended", () => {
  it("an unknown flow name is LOOM_UNKNOWN_FLOW", async ({ expect }) => {
    const cwd = tempDir();
    const r = await loom(cwd, "run", FLOWS, "nope", "--id", "x-1");
    expect(r.code).toBe(1);
    expect(oneErrorLine(r)).toMatch(/^loom: LOOM_UNKNOWN_FLOW no flow named "nope"/);
    expect(r.stdout).toBe("");
    // Refused before the database is opened: no loom.db is created.
    expect(existsSync(join(cwd, "loom.db"))).toBe(false);
  });

  it("a malformed id is LOOM_INVALID_ID (W4)", async ({ expect }) => {
    const cwd = tempDir();
    const r = await loom(
      cwd,
      "run",
      FLOWS,
      "two-steps",
      "--input",
      '{"name":"a"}',
      "--id",
      "bad id!",
    );
    expect(r.code).toBe(1);
    expect(oneErrorLine(r)).toMatch(/^loom: LOOM_INVALID_ID execution id "bad id!"/);
    expect((await loom(cwd, "ls")).stdout.trim()).toBe("no executions");
  });

  it("malformed --input JSON is a usage error before the database is opened", async ({
    expect,
  }) => {
    const cwd = tempDir();
    const r = await loom(cwd, "run", FLOWS, "two-steps", "--input", "{bad");
    expect(r.code).toBe(2);
    expect(oneErrorLine(r)).toMatch(/^loom: --input is not valid JSON/);
    expect(existsSync(join(cwd, "loom.db"))).toBe(false);
  });

  it("a missing module names the path it looked at", async ({ expect }) => {
    const cwd = tempDir();
    const r = await loom(cwd, "run", "./missing.ts", "two-steps");
    expect(r.code).toBe(1);
    expect(oneErrorLine(r)).toBe(
      `loom: cannot find module "./missing.ts" (no file at ${join(cwd, "missing.ts")})`,
    );
    expect(existsSync(join(cwd, "loom.db"))).toBe(false);
  });

  it("an unknown command prints the usage and exits 2; --help exits 0", async ({ expect }) => {
    const cwd = tempDir();
    const [bad, help] = await Promise.all([loom(cwd, "frob"), loom(cwd, "--help")]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^loom: unknown command "frob"\n/);
    expect(bad.stderr).toContain("usage: loom <command>");
    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toMatch(/^usage: loom <command>/);
    expect(existsSync(join(cwd, "loom.db"))).toBe(false);
  });

  it("read commands refuse a missing database and an unknown id", async ({ expect }) => {
    const cwd = tempDir();
    const noDb = await loom(cwd, "ls");
    expect(noDb.code).toBe(1);
    expect(oneErrorLine(noDb)).toMatch(/^loom: no database at /);
    expect(existsSync(join(cwd, "loom.db"))).toBe(false);
    expect((await loom(cwd, "run", FLOWS, "fails", "--id", "f-1")).code).toBe(1);
    const [show, resume] = await Promise.all([
      loom(cwd, "show", "nope"),
      loom(cwd, "resume", "f-1", "{}"),
    ]);
    expect(show.code).toBe(1);
    expect(oneErrorLine(show)).toBe('loom: LOOM_NOT_FOUND no execution has the id "nope"');
    expect(resume.code).toBe(1);
    expect(oneErrorLine(resume)).toMatch(/^loom: LOOM_NOT_RESUMABLE execution "f-1" has ended/);
  });
});
