/**
 * `loom send`, `loom fork` and `loom ui`, end to end (like test/cli.test.ts, whose head lists
 * every verb and its test): the real CLI in a child process against test/fixtures/cli/flows.ts.
 * Executions a test only needs to exist are made in process, on the same database file.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCommand } from "../src/cli/args.ts";
import { UsageError } from "../src/cli/cli-error.ts";
import { createRuntime, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { counts, twoSteps } from "./fixtures/cli/flows.ts";
import {
  FLOWS,
  loom,
  oneErrorLine,
  showJson,
  start,
  tempDirs,
  until,
} from "./fixtures/cli/spawn.ts";

const tempDir = tempDirs("loom-cli-sfu-");

const openDb = (cwd: string): Runtime =>
  createRuntime({ store: sqliteStore(join(cwd, "loom.db")), background: false });

describe("loom send", () => {
  it("send posts to the inbox a loom run receives from, by topic, with its key", async () => {
    const cwd = tempDir();
    const run = start(cwd, ["run", FLOWS, "inbox", "--id", "in-1"]);
    // The run's progress says when the flow waits in a receive.
    await until("the first receive", () =>
      run.stderr().includes("receive#0 waiting for a message on topic main"),
    );
    const [sent, missing, badJson, noJson] = await Promise.all([
      loom(cwd, "send", "in-1", '{"text":"hi"}', "--key", "k-1"),
      loom(cwd, "send", "nope", "{}"),
      loom(cwd, "send", "in-1", "{bad"),
      loom(cwd, "send", "in-1"),
    ]);
    expect(sent).toMatchObject({ code: 0, stdout: "sent to in-1 (topic main, message 0)\n" });
    expect(sent.stderr).toBe("");
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing)).toMatch(/^loom: LOOM_NOT_FOUND /);
    expect(badJson.code).toBe(2);
    expect(oneErrorLine(badJson)).toMatch(/^loom: the message is not valid JSON/);
    expect(noJson.code).toBe(2);

    await until("the second receive", () =>
      run.stderr().includes("receive#1 waiting for a message on topic side"),
    );
    const side = await loom(cwd, "send", "in-1", '{"text":"there"}', "--topic", "side");
    expect(side).toMatchObject({ code: 0, stdout: "sent to in-1 (topic side, message 1)\n" });

    const ended = await run.exited;
    expect(ended.code).toBe(0);
    expect(JSON.parse(ended.stdout)).toEqual({
      id: "in-1",
      status: "completed",
      output: { first: "hi", side: "there" },
    });
    expect(ended.stderr).toContain("  receive#0 took message 0\n");
    const [shown, late] = await Promise.all([
      showJson(cwd, "in-1"),
      loom(cwd, "send", "in-1", "{}"),
    ]);
    const consumed = shown.events.filter((e) => e.kind === "MESSAGE_CONSUMED");
    expect(consumed.map((e) => e.payload)).toMatchObject([
      { topic: "main", seq: 0, key: "k-1", payload: { text: "hi" } },
      { topic: "side", seq: 1, payload: { text: "there" } },
    ]);
    // An ended execution receives nothing: refused, nothing appended.
    expect(late.code).toBe(1);
    expect(oneErrorLine(late)).toMatch(/^loom: LOOM_NOT_RESUMABLE execution "in-1" has ended/);
  });
});

describe("loom fork", () => {
  it("fork records a copy a worker drives on, or with --module drives it here", async () => {
    const cwd = tempDir();
    const setup = openDb(cwd);
    // counts(10): sequences 1, 2 and 3 are the steps one (11), two (12) and three (13).
    await (await setup.start(counts, 10, { id: "c-1" })).result();
    await setup.close();

    const [recorded, driven, pastEnd, notANumber, quietAlone] = await Promise.all([
      loom(cwd, "fork", "c-1", "2", "--id", "c-1-f"),
      loom(cwd, "fork", "c-1", "1", "--id", "c-1-g", "--module", FLOWS),
      loom(cwd, "fork", "c-1", "9"),
      loom(cwd, "fork", "c-1", "x"),
      loom(cwd, "fork", "c-1", "1", "--quiet"),
    ]);
    // Recorded only: the new id is the one line on stdout; a worker drives it.
    expect(recorded).toMatchObject({ code: 0, stdout: "c-1-f\n" });
    expect(oneErrorLine(recorded)).toBe(
      'loom: forked c-1 at 2 as c-1-f (running); a loom worker with flow "counts" drives it on',
    );
    // Driven here: the outcome like loom run's, and progress for what ran after the fork point.
    expect(driven.code).toBe(0);
    expect(JSON.parse(driven.stdout)).toEqual({ id: "c-1-g", status: "completed", output: 13 });
    expect(driven.stderr).toMatch(
      /^loom: forked c-1 at 1 as c-1-g\n {2}step two#0 completed in \d+ ms\n {2}step three#0 completed in \d+ ms\n$/,
    );
    expect(pastEnd.code).toBe(1);
    expect(oneErrorLine(pastEnd)).toMatch(/^loom: LOOM_INVALID_INPUT execution "c-1" has 5 events/);
    expect(notANumber.code).toBe(2);
    expect(oneErrorLine(notANumber)).toMatch(/^loom: the fork point needs a sequence number/);
    expect(quietAlone.code).toBe(2);

    const copy = await showJson(cwd, "c-1-f");
    expect(copy.state.status).toBe("running");
    // What it is a fork of, and its clock: counted from the fork unless --keep-deadline.
    expect((copy.state as { _forkedFrom?: unknown })._forkedFrom).toEqual({
      executionId: "c-1",
      seq: 2,
    });
    const shown = await loom(cwd, "show", "c-1-f");
    expect(shown.stdout).toMatch(/forked\s+from c-1 at sequence 2/);
    const kept = await loom(cwd, "fork", "c-1", "2", "--id", "c-1-k", "--keep-deadline");
    expect(kept.code).toBe(0);
    const stamp = (e: { meta?: unknown } | undefined) =>
      (e?.meta as { forkedAt?: unknown })?.forkedAt;
    expect(typeof stamp(copy.events.at(-1))).toBe("number");
    expect(stamp((await showJson(cwd, "c-1-k")).events.at(-1))).toBeUndefined();
    expect(copy.events.map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "STEP_COMPLETED",
      "STEP_COMPLETED",
    ]);
    const worker = start(cwd, ["worker", FLOWS]);
    try {
      await until("the worker to recover the fork", () => worker.stderr().includes("c-1-f"));
      const reader = openDb(cwd);
      try {
        let state = await reader.getState("c-1-f");
        for (let i = 0; i < 100 && state.status !== "completed"; i++) {
          await new Promise((r) => setTimeout(r, 100));
          state = await reader.getState("c-1-f");
        }
        expect(state).toMatchObject({ status: "completed", output: 13 });
      } finally {
        await reader.close();
      }
    } finally {
      worker.child.kill("SIGTERM");
    }
    expect((await worker.exited).code).toBe(0);
  });
});

describe("loom ui", () => {
  it("loom ui serves the executions until SIGTERM; a missing database or a bad port is refused", async () => {
    const cwd = tempDir();
    const setup = openDb(cwd);
    await (await setup.start(twoSteps, { name: "ui" }, { id: "u-1" })).result();
    await setup.close();

    const ui = start(cwd, ["ui", "--port", "0"]);
    const [noDb, badPort] = await Promise.all([
      loom(tempDir(), "ui", "--port", "0"),
      loom(cwd, "ui", "--port", "http"),
    ]);
    expect(noDb.code).toBe(1);
    expect(oneErrorLine(noDb)).toMatch(/^loom: no database at /);
    expect(badPort.code).toBe(2);

    await until("the sign-in URL", () => /^loom ui: sign in at \S+\n/m.test(ui.stdout()));
    const url = /^loom ui: (\S+)/.exec(ui.stdout())?.[1] ?? "";
    const signIn = /^loom ui: sign in at (\S+)$/m.exec(ui.stdout())?.[1] ?? "";
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(signIn.startsWith(`${url}/auth?token=`)).toBe(true);
    const token = new URL(signIn).searchParams.get("token") ?? "";
    try {
      // auth.ts A1: the port alone opens nothing, loopback included.
      expect((await fetch(`${url}/api/executions`)).status).toBe(401);
      const auth = { authorization: `Bearer ${token}` };
      const [list, page] = await Promise.all([
        fetch(`${url}/api/executions`, { headers: auth }),
        fetch(`${url}/`, { headers: auth }),
      ]);
      expect(list.status).toBe(200);
      const body = (await list.json()) as { executions: { executionId: string; status: string }[] };
      expect(body.executions.map((e) => [e.executionId, e.status])).toEqual([["u-1", "completed"]]);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    } finally {
      ui.child.kill("SIGTERM");
    }
    const stopped = await ui.exited;
    expect(stopped.code).toBe(0);
    // The token is printed once, in the sign-in URL, and nowhere else.
    expect(stopped.stdout).toBe(`loom ui: ${url}\nloom ui: sign in at ${signIn}\n`);
    expect(stopped.stderr).not.toContain(token);
    expect(stopped.stderr).toContain("loom: SIGTERM received; closing the UI");
    expect(stopped.stderr.trimEnd().endsWith("loom: UI stopped")).toBe(true);
  });
});

describe("loom ui --token-file, --read-only (issue 22 item 5)", () => {
  it("S5, A4: a token from --token-file (before LOOM_UI_TOKEN_FILE) is never printed; --read-only refuses writes with it; a bad file is refused", async () => {
    const cwd = tempDir();
    const setup = openDb(cwd);
    await (await setup.start(twoSteps, { name: "ui" }, { id: "u-1" })).result();
    await setup.close();
    const token = "f".repeat(48);
    writeFileSync(join(cwd, "token"), `${token}\n`);
    writeFileSync(join(cwd, "short"), "short\n");
    const [badFile, missingFile] = await Promise.all([
      start(cwd, ["ui", "--port", "0", "--token-file", "short"]).exited,
      start(cwd, ["ui", "--port", "0"], { LOOM_UI_TOKEN_FILE: join(cwd, "none") }).exited,
    ]);
    expect(badFile.code).toBe(1);
    expect(oneErrorLine(badFile)).toMatch(/^loom: .*token from the file .*short must be/);
    expect(missingFile.code).toBe(1);
    expect(oneErrorLine(missingFile)).toMatch(/^loom: .*cannot read the dashboard token file /);
    // --token-file wins over LOOM_UI_TOKEN_FILE (here a file it would refuse).
    const ui = start(cwd, ["ui", "--port", "0", "--read-only", "--token-file", "token"], {
      LOOM_UI_TOKEN_FILE: join(cwd, "short"),
    });
    await until("the URL", () => /^loom ui: http:\/\/\S+\n/.test(ui.stdout()));
    const url = /^loom ui: (\S+)/.exec(ui.stdout())?.[1] ?? "";
    try {
      const auth = { authorization: `Bearer ${token}` };
      expect((await fetch(`${url}/api/executions/u-1`)).status).toBe(401);
      expect((await fetch(`${url}/api/executions/u-1`, { headers: auth })).status).toBe(200);
      const cancel = await fetch(`${url}/api/executions/u-1/cancel`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: "{}",
      });
      expect(cancel.status).toBe(404);
    } finally {
      ui.child.kill("SIGTERM");
    }
    const stopped = await ui.exited;
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toBe(`loom ui: ${url}\n`);
    expect(stopped.stderr).not.toContain(token);
    expect(stopped.stderr).toContain("read-only");
  });
});

describe("the command lines of send, fork, ls and ui", () => {
  // In process: parsing needs no child (the verbs above run end to end).
  it("parse into typed commands with their defaults", () => {
    expect(parseCommand(["send", "a-1", '{"x":1}', "--topic", "t", "--key", "k"])).toEqual({
      name: "send",
      db: "./loom.db",
      id: "a-1",
      message: { x: 1 },
      topic: "t",
      key: "k",
    });
    expect(parseCommand(["fork", "a-1", "3"])).toEqual({
      name: "fork",
      db: "./loom.db",
      id: "a-1",
      atSequence: 3,
      keepDeadline: false,
      quiet: false,
    });
    expect(parseCommand(["fork", "a-1", "3", "--keep-deadline"])).toMatchObject({
      keepDeadline: true,
    });
    expect(parseCommand(["fork", "a-1", "0", "--id", "b", "--module", "f.ts", "-q"])).toMatchObject(
      { newId: "b", module: "f.ts", quiet: true, atSequence: 0 },
    );
    expect(parseCommand(["ui"])).toEqual({
      name: "ui",
      db: "./loom.db",
      port: 7070,
      host: "127.0.0.1",
      allowHosts: [],
      readOnly: false,
    });
    expect(parseCommand(["ui", "--read-only", "--token-file", "t"])).toMatchObject({
      readOnly: true,
      tokenFile: "t",
    });
    expect(parseCommand(["ui", "--host", "0.0.0.0", "--allow-host", "box, box.lan"])).toMatchObject(
      { host: "0.0.0.0", allowHosts: ["box", "box.lan"] },
    );
    expect(parseCommand(["ls", "--flow", "f", "--limit", "5", "--after", "x"])).toMatchObject({
      flow: "f",
      limit: 5,
      after: "x",
    });
    expect(parseCommand(["run", "m.ts", "f", "--quiet"])).toMatchObject({ quiet: true });
  });

  it("refuse what cannot mean anything, as usage errors", () => {
    const refused: string[][] = [
      ["ui", "--host", "0.0.0.0"],
      ["send", "a-1"],
      ["send", "a-1", "{}", "--topic", ""],
      ["fork", "a-1"],
      ["fork", "a-1", "-1"],
      ["fork", "a-1", "1.5"],
      ["fork", "a-1", "1", "--quiet"],
      ["ls", "--limit", "-1"],
      ["ls", "--after", ""],
      ["ls", "--module", "m.ts"],
      ["ui", "--port", "65536"],
      ["ui", "--host", ""],
      ["ui", "--json"],
      ["ui", "--token-file", ""],
      ["show", "a-1", "--quiet"],
    ];
    for (const argv of refused) {
      expect(() => parseCommand(argv), argv.join(" ")).toThrow(UsageError);
    }
  });
});
