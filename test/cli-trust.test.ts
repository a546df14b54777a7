/**
 * The `loom` command on a sealed, audited database, end to end (like test/cli.test.ts: the real
 * CLI in a child process, against test/fixtures/cli/flows.ts): the environment that configures
 * the codec and the audit (`LOOM_CODEC_KEYS`, `LOOM_CODEC_KEY_ID`, `LOOM_AUDIT`,
 * `LOOM_AUDIT_KEY`), `loom verify`, `loom erase-subject` and `loom run --subject`.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/cli-error.ts";
import { trustFromEnv } from "../src/cli/open-runtime.ts";
import { FLOWS, start, tempDirs, until, type Result } from "./fixtures/cli/spawn.ts";
import { EVENT_TABLES, OF_EXECUTION, textRows } from "./support/sqlite-rows.ts";

type Env = Record<string, string>;

const tempDir = tempDirs("loom-cli-trust-");

/** `loom` with this file's environment first: every trust command takes its keys from it. */
const loom = (cwd: string, env: Env, ...args: string[]): Promise<Result> =>
  start(cwd, args, env).exited;

interface Shown {
  state: { status: string; input?: unknown; output?: unknown; _erased?: string[] };
  events: { seq: number; kind: string; payload: unknown }[];
}

async function showJson(cwd: string, env: Env, id: string): Promise<Shown> {
  const shown = await loom(cwd, env, "show", id, "--json");
  expect(shown.stderr).toBe("");
  expect(shown.code).toBe(0);
  return JSON.parse(shown.stdout) as Shown;
}

/** One line on stderr, starting `loom:`. */
function oneErrorLine(r: Result): string {
  const lines = r.stderr.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^loom: /);
  return lines[0] ?? "";
}

interface Row {
  seq: number;
  payload: string;
  meta: string | null;
}

/** The stored rows of `id`'s log, read behind the store's back. */
function rawRows(cwd: string, id: string): Row[] {
  const db = new Database(join(cwd, "loom.db"));
  try {
    return textRows(db, id);
  } finally {
    db.close();
  }
}

/** Rewrites the stored payload of one event in both event tables; returns the rows changed. */
function tamper(cwd: string, id: string, seq: number, from: string, to: string): number {
  const db = new Database(join(cwd, "loom.db"));
  try {
    let changed = 0;
    for (const t of EVENT_TABLES) {
      changed += db
        .prepare(
          `UPDATE ${t} SET payload = replace(payload, ?, ?) WHERE ${OF_EXECUTION} AND seq = ?`,
        )
        .run(from, to, id, seq).changes;
    }
    return changed;
  } finally {
    db.close();
  }
}

const AUDIT: Env = { LOOM_AUDIT: "1" };
const greet = (id: string, name: string, ...more: string[]): string[] => [
  "run",
  FLOWS,
  "two-steps",
  "--input",
  JSON.stringify({ name }),
  "--id",
  id,
  ...more,
];

describe("loom verify", () => {
  it("says ok for an audited log, names the first changed sequence, and prints the report as JSON", async () => {
    const cwd = tempDir();
    expect((await loom(cwd, AUDIT, ...greet("a-1", "ada"))).code).toBe(0);

    const ok = await loom(cwd, {}, "verify", "a-1");
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    const line = /^ok a-1: 4 events, head ([A-Za-z0-9_-]{43})\n$/.exec(ok.stdout);
    expect(line).not.toBeNull();
    const json = await loom(cwd, {}, "verify", "a-1", "--json");
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({
      executionId: "a-1",
      ok: true,
      events: 4,
      headHash: line?.[1],
    });

    // Sequence 1 is STEP_COMPLETED greet -> "hello ada": make it say something else.
    expect(rawRows(cwd, "a-1")[1]?.payload).toContain("hello ada");
    expect(tamper(cwd, "a-1", 1, "hello ada", "hello eve")).toBeGreaterThan(0);
    const [bad, badJson] = await Promise.all([
      loom(cwd, AUDIT, "verify", "a-1"),
      loom(cwd, AUDIT, "verify", "a-1", "--json"),
    ]);
    expect(bad).toMatchObject({
      code: 1,
      stdout: "TAMPERED a-1: first bad sequence 1 (changed)\n",
      stderr: "",
    });
    expect(badJson.code).toBe(1);
    expect(JSON.parse(badJson.stdout)).toMatchObject({
      executionId: "a-1",
      ok: false,
      firstBadSeq: 1,
      problem: "changed",
    });
  });

  it("a log written without the audit is unhashed; an unknown id is LOOM_NOT_FOUND", async () => {
    const cwd = tempDir();
    expect((await loom(cwd, {}, ...greet("plain-1", "bo"))).code).toBe(0);
    const [plain, missing, usage] = await Promise.all([
      loom(cwd, AUDIT, "verify", "plain-1"),
      loom(cwd, AUDIT, "verify", "nope"),
      loom(cwd, AUDIT, "verify"),
    ]);
    expect(plain.code).toBe(1);
    expect(plain.stdout).toBe("TAMPERED plain-1: first bad sequence 0 (unhashed)\n");
    expect(oneErrorLine(plain)).toMatch(/written with the audit off: set LOOM_AUDIT=1/);
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing)).toBe('loom: LOOM_NOT_FOUND no execution has the id "nope"');
    expect(usage.code).toBe(2);
    // Where the deployment has no audit, the same log is not audited, which is not an error.
    const unaudited = await loom(cwd, {}, "verify", "plain-1");
    expect(unaudited.code).toBe(0);
    expect(unaudited.stdout).toMatch(
      /^not audited plain-1: \d+ events, written with the audit off/,
    );
  });

  it("a keyed audit verifies with its key, and not without it", async () => {
    const cwd = tempDir();
    const keyed: Env = { LOOM_AUDIT_KEY: "correct horse battery staple" };
    expect((await loom(cwd, keyed, ...greet("k-1", "cy"))).code).toBe(0);
    const [withKey, otherKey] = await Promise.all([
      loom(cwd, keyed, "verify", "k-1"),
      loom(cwd, { LOOM_AUDIT_KEY: "another key" }, "verify", "k-1"),
    ]);
    expect(withKey.code).toBe(0);
    expect(withKey.stdout).toMatch(/^ok k-1: 4 events, head /);
    expect(otherKey.code).toBe(1);
    expect(otherKey.stdout).toBe("TAMPERED k-1: first bad sequence 0 (changed)\n");
  });
});

describe("a sealed database (LOOM_CODEC_KEYS)", () => {
  it("is sealed at rest, readable with its keys, and a clear error without them", async () => {
    const cwd = tempDir();
    const hex = randomBytes(32).toString("hex");
    const base64 = randomBytes(32).toString("base64");
    const sealed: Env = { LOOM_CODEC_KEYS: `k1:${hex}`, ...AUDIT };
    expect((await loom(cwd, sealed, ...greet("c-1", "ada"))).code).toBe(0);
    const rows = rawRows(cwd, "c-1");
    expect(rows).toHaveLength(4);
    for (const r of rows) {
      expect(r.payload).not.toContain("ada");
      expect(JSON.parse(r.meta ?? "{}")).toMatchObject({ codec: "aes-256-gcm", keyId: "k1" });
    }

    // Rotation: k2 (base64) is the last pair, so new payloads are sealed with it; k1 still opens.
    const rotated: Env = { LOOM_CODEC_KEYS: `k1:${hex}, k2:${base64}`, ...AUDIT };
    expect((await loom(cwd, rotated, ...greet("c-2", "bo"))).code).toBe(0);
    expect(JSON.parse(rawRows(cwd, "c-2")[0]?.meta ?? "{}")).toMatchObject({ keyId: "k2" });

    const [shown, shownOld, pinned, without, wrong, verified] = await Promise.all([
      showJson(cwd, rotated, "c-2"),
      showJson(cwd, rotated, "c-1"),
      loom(cwd, { ...rotated, LOOM_CODEC_KEY_ID: "k1" }, "show", "c-1"),
      loom(cwd, {}, "show", "c-1"),
      loom(cwd, { LOOM_CODEC_KEYS: `k2:${base64}` }, "show", "c-1"),
      loom(cwd, sealed, "verify", "c-1"),
    ]);
    expect(shown.state.output).toEqual({ greeting: "hello bo", length: 8 });
    expect(shownOld.state.input).toEqual({ name: "ada" });
    expect(pinned.code).toBe(0);
    expect(pinned.stdout).toMatch(/^output\s+\{"greeting":"hello ada","length":9\}$/m);
    expect(verified.stdout).toMatch(/^ok c-1: 4 events/);

    expect(without.code).toBe(1);
    expect(without.stdout).toBe("");
    expect(oneErrorLine(without)).toMatch(
      /^loom: LOOM_CODEC_KEY a payload is sealed with codec "aes-256-gcm" \(key "k1"\), and this runtime has no codec .*LOOM_CODEC_KEYS/,
    );
    expect(wrong.code).toBe(1);
    expect(oneErrorLine(wrong)).toMatch(
      /^loom: LOOM_CODEC_KEY .*codec key "k1", which is not given/,
    );
    for (const r of [without, wrong]) {
      expect(r.stderr).not.toContain(hex);
      expect(r.stderr).not.toContain(base64);
    }
  });
});

describe("loom erase-subject", () => {
  it("refuses without --yes; with it, erases the subject's payloads and the log still verifies", async () => {
    const cwd = tempDir();
    const [mine, other] = await Promise.all([
      loom(cwd, AUDIT, ...greet("e-1", "ada", "--subject", "cust-7")),
      loom(cwd, AUDIT, ...greet("e-2", "bo", "--subject", "cust-8")),
    ]);
    expect(mine.code).toBe(0);
    expect(other.code).toBe(0);
    const before = await showJson(cwd, {}, "e-1");
    expect(before.state.input).toEqual({ name: "ada" });

    const refused = await loom(cwd, AUDIT, "erase-subject", "cust-7");
    expect(refused.code).toBe(2);
    const says = oneErrorLine(refused);
    expect(says).toContain("--yes");
    expect(says).toMatch(/cancel every live execution/);
    expect(says).toMatch(/record SUBJECT_ERASED/);
    expect(says).toMatch(/destroy the subject's key/);
    expect(says).toMatch(/irreversible/);
    expect(await showJson(cwd, {}, "e-1")).toEqual(before);

    const erased = await loom(cwd, AUDIT, "erase-subject", "cust-7", "--yes");
    expect(erased.stderr).toBe("");
    expect(erased.code).toBe(0);
    expect(erased.stdout).toMatch(/^erased\s+subject cust-7$/m);
    expect(erased.stdout).toMatch(/^executions\s+1: e-1$/m);
    expect(erased.stdout).toMatch(/^cancelled\s+none$/m);
    expect(erased.stdout).toMatch(/^key\s+destroyed$/m);

    const after = await showJson(cwd, {}, "e-1");
    expect(after.state._erased).toEqual(["cust-7"]);
    expect(after.events.map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "STEP_COMPLETED",
      "STEP_COMPLETED",
      "EXECUTION_COMPLETED",
      "SUBJECT_ERASED",
    ]);
    // The start keeps what is not the subject's data (sealed-store.ts V7): flow and subject.
    expect(after.events[0]?.payload).toEqual({
      $erased: "cust-7",
      subject: "cust-7",
      flow: "two-steps",
      flowVersion: "1",
    });
    for (const e of after.events.slice(1, 4)) expect(e.payload).toEqual({ $erased: "cust-7" });
    expect(after.events[4]?.payload).toEqual({ subject: "cust-7" });

    const [verified, untouched, again, text] = await Promise.all([
      loom(cwd, {}, "verify", "e-1"),
      showJson(cwd, {}, "e-2"),
      loom(cwd, AUDIT, "erase-subject", "cust-7", "--yes", "--json"),
      loom(cwd, {}, "show", "e-1"),
    ]);
    expect(verified).toMatchObject({ code: 0, stderr: "" });
    expect(verified.stdout).toMatch(/^ok e-1: 5 events, head \S+\n$/);
    expect(untouched.state.input).toEqual({ name: "bo" });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({
      subject: "cust-7",
      executions: ["e-1"],
      cancelled: [],
      keyDestroyed: false,
    });
    expect(text.stdout).toMatch(/^erased\s+subject cust-7 \(payloads unrecoverable\)$/m);
    expect(text.stdout).toMatch(/EXECUTION_STARTED\s+\(payload erased: subject cust-7\)/);
  });

  it("cancels a live execution of the subject: its loom run ends cancelled", async () => {
    const cwd = tempDir();
    const run = start(
      cwd,
      ["run", FLOWS, "wait-for-text", "--id", "live-1", "--subject", "cust-9"],
      AUDIT,
    );
    await until("the parked notice", () => run.stderr().includes("is parked"));
    const erased = await loom(cwd, AUDIT, "erase-subject", "cust-9", "--yes");
    expect(erased.code).toBe(0);
    expect(erased.stdout).toMatch(/^executions\s+1: live-1$/m);
    expect(erased.stdout).toMatch(/^cancelled\s+1: live-1$/m);
    const result = await run.exited;
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ id: "live-1", status: "cancelled" });
    const shown = await showJson(cwd, {}, "live-1");
    expect(shown.events.map((e) => e.kind).slice(-2)).toEqual([
      "EXECUTION_CANCELLED",
      "SUBJECT_ERASED",
    ]);
    expect((await loom(cwd, {}, "verify", "live-1")).code).toBe(0);
  });
});

describe("malformed environment: a usage error naming the variable, never a key", () => {
  const hex = randomBytes(32).toString("hex");
  const cases: [string, Env, RegExp][] = [
    [
      "a pair with no id",
      { LOOM_CODEC_KEYS: hex },
      /^loom: LOOM_CODEC_KEYS: pair 1 of 1 is not id:key/,
    ],
    [
      "a short key",
      { LOOM_CODEC_KEYS: `k1:${hex},k2:abcd` },
      /^loom: LOOM_CODEC_KEYS: pair 2 of 2: its key must be 32 bytes/,
    ],
    [
      "a pair written key first",
      { LOOM_CODEC_KEYS: `${hex}:k1` },
      /^loom: LOOM_CODEC_KEYS: pair 1 of 1: its key must be 32 bytes/,
    ],
    [
      "a bad id",
      { LOOM_CODEC_KEYS: `bad id!:${hex}` },
      /^loom: LOOM_CODEC_KEYS: pair 1 of 1: its id must be/,
    ],
    [
      "an empty pair",
      { LOOM_CODEC_KEYS: `k1:${hex},` },
      /^loom: LOOM_CODEC_KEYS: pair 2 of 2 is empty/,
    ],
    [
      "a repeated id",
      { LOOM_CODEC_KEYS: `k1:${hex},k1:${hex}` },
      /^loom: LOOM_CODEC_KEYS: pairs 1 and 2 have the same id/,
    ],
    [
      "an unknown current key",
      { LOOM_CODEC_KEYS: `k1:${hex}`, LOOM_CODEC_KEY_ID: "k9" },
      /^loom: LOOM_CODEC_KEY_ID is not the id of any of the 1 pair\(s\) in LOOM_CODEC_KEYS/,
    ],
    [
      "a current key without keys",
      { LOOM_CODEC_KEY_ID: "k1" },
      /^loom: LOOM_CODEC_KEY_ID is set but LOOM_CODEC_KEYS is not/,
    ],
    ["an unknown audit flag", { LOOM_AUDIT: "yes" }, /^loom: LOOM_AUDIT must be 1 or true/],
    ["an empty audit key", { LOOM_AUDIT_KEY: "" }, /^loom: LOOM_AUDIT_KEY is set but empty/],
    [
      "an audit key with the audit off",
      { LOOM_AUDIT_KEY: "k", LOOM_AUDIT: "0" },
      /^loom: LOOM_AUDIT_KEY is set but LOOM_AUDIT turns the audit off/,
    ],
  ];
  // In process (each spawn costs a tsx start-up); the commands' exit code is checked below.
  for (const [what, env, message] of cases) {
    it(`${what}`, () => {
      let thrown: unknown;
      try {
        trustFromEnv(env);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(UsageError);
      const text = (thrown as Error).message;
      expect(`loom: ${text}`).toMatch(message);
      expect(text).not.toContain(hex);
    });
  }

  it("well-formed values: a codec sealing with the current key, a plain or keyed audit", async () => {
    const base64 = randomBytes(32).toString("base64");
    const { codec } = trustFromEnv({ LOOM_CODEC_KEYS: ` k1:${hex} , k2:${base64} ` });
    expect(codec?.name).toBe("aes-256-gcm");
    expect((await codec?.seal(new Uint8Array([1]), "aad"))?.keyId).toBe("k2");
    const pinned = trustFromEnv({
      LOOM_CODEC_KEYS: `k1:${hex},k2:${base64}`,
      LOOM_CODEC_KEY_ID: "k1",
    });
    expect((await pinned.codec?.seal(new Uint8Array([1]), "aad"))?.keyId).toBe("k1");
    expect(trustFromEnv({})).toEqual({});
    expect(trustFromEnv({ LOOM_AUDIT: "0" })).toEqual({});
    expect(trustFromEnv({ LOOM_AUDIT: "1" })).toEqual({ audit: true });
    expect(trustFromEnv({ LOOM_AUDIT: "true" })).toEqual({ audit: true });
    expect(trustFromEnv({ LOOM_AUDIT_KEY: "s3cret" })).toEqual({ audit: { key: "s3cret" } });
    expect(trustFromEnv({ LOOM_AUDIT: "1", LOOM_AUDIT_KEY: "s" })).toEqual({ audit: { key: "s" } });
  });

  it("every command exits 2 on it before the database is opened", async () => {
    const cwd = tempDir();
    const [run, ls, verify, badSubject] = await Promise.all([
      loom(cwd, { LOOM_CODEC_KEYS: `${hex}:k1` }, ...greet("x-1", "ada")),
      loom(cwd, { LOOM_AUDIT: "on" }, "ls"),
      loom(cwd, { LOOM_CODEC_KEYS: "k1:nope" }, "verify", "x"),
      loom(cwd, {}, ...greet("x-2", "ada", "--subject", "")),
    ]);
    expect(run.code).toBe(2);
    expect(oneErrorLine(run)).toMatch(/^loom: LOOM_CODEC_KEYS: pair 1 of 1: its key must be/);
    expect(run.stderr).not.toContain(hex);
    expect(run.stdout).toBe("");
    expect(ls.code).toBe(2);
    expect(oneErrorLine(ls)).toMatch(/^loom: LOOM_AUDIT must be/);
    expect(verify.code).toBe(2);
    expect(oneErrorLine(verify)).toMatch(/^loom: LOOM_CODEC_KEYS: pair 1 of 1/);
    expect(badSubject.code).toBe(2);
    expect(oneErrorLine(badSubject)).toMatch(/^loom: a subject must be 1 to 200 characters/);
    expect(existsSync(join(cwd, "loom.db"))).toBe(false);
  });
});
