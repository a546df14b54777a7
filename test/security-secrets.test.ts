/**
 * Secrets against a child process and a printed line (issue 22, item 4): isolated.ts's allow-listed
 * environment, secrets.ts Q1..Q3 (read once, then gone from the environment; the file forms),
 * redact.ts R1 (no password in a printed line).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ALLOWED_ENV } from "../src/effects/isolated.ts";
import { flow$, memoryStore } from "../src/index.ts";
import { parseCommand } from "../src/cli/args.ts";
import { main } from "../src/cli/main.ts";
import { CliError } from "../src/cli/cli-error.ts";
import { processIo } from "../src/cli/io.ts";
import { databaseFlags, openRuntime, trustFromEnv } from "../src/cli/open-runtime.ts";
import { environmentWithSecrets } from "../src/cli/secrets.ts";
import { execFile } from "./support/processes.ts";
import { seenEnv } from "./support/env-effects.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
const KEY_HEX = "ab".repeat(32);
const SECRETS = {
  LOOM_CODEC_KEYS: `k1:${KEY_HEX}`,
  LOOM_AUDIT_KEY: "an-audit-key-nobody-else-knows",
  LOOM_TEST_WORKER_SECRET: "a-worker-secret-of-some-length-42",
  NODE_OPTIONS: "--no-warnings",
};

const saved = new Map<string, string | undefined>();
function setEnv(values: Record<string, string>): void {
  for (const [name, value] of Object.entries(values)) {
    if (!saved.has(name)) saved.set(name, process.env[name]);
    process.env[name] = value;
  }
}
const dirs: string[] = [];
afterEach(() => {
  for (const [name, value] of saved) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  saved.clear();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("an isolated() effect's child (K7 environment)", () => {
  it("sees none of the secrets of the process that runs it, only the basics and what it is given", async () => {
    setEnv(SECRETS);
    const f = flow$("peeks", async (ctx) => ctx.execute(seenEnv, null));
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "peek-1" })).result();
    expect(out.status).toBe("completed");
    const seen = out.output as { names: string[]; proc: string };
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(seen.names, name).not.toContain(name);
      expect(seen.proc.includes(value), name).toBe(false);
    }
    expect(seen.names).toContain("GIVEN_ON_PURPOSE");
    expect(seen.names).toContain("PATH");
    const allowed = new Set([...ALLOWED_ENV, "GIVEN_ON_PURPOSE"]);
    expect(seen.names.filter((n) => !allowed.has(n))).toEqual([]);
  });
});

describe("the CLI's secrets (Q1..Q3)", () => {
  it("takes the codec and audit keys out of the environment a child inherits, and keeps them", async () => {
    setEnv({ LOOM_CODEC_KEYS: SECRETS.LOOM_CODEC_KEYS, LOOM_AUDIT_KEY: SECRETS.LOOM_AUDIT_KEY });
    const dir = mkdtempSync(join(tmpdir(), "loom-secrets-"));
    dirs.push(dir);
    // What every command does first: open its runtime, with the codec and audit it configures.
    const runtime = await openRuntime({ db: join(dir, "loom.db") }, dir, {
      background: false,
      mustExist: false,
    });
    await runtime.close();
    // Q1: gone from the environment, so a child started now does not inherit them.
    expect(process.env.LOOM_CODEC_KEYS).toBeUndefined();
    expect(process.env.LOOM_AUDIT_KEY).toBeUndefined();
    const { stdout } = await execFile(process.execPath, [
      "-e",
      "console.log(Object.keys(process.env).join(','))",
    ]);
    expect(stdout.split(",")).not.toContain("LOOM_AUDIT_KEY");
    expect(stdout.split(",")).not.toContain("LOOM_CODEC_KEYS");
    // Q3: a later runtime of the same command still has them.
    expect(trustFromEnv(environmentWithSecrets()).audit).toEqual({ key: SECRETS.LOOM_AUDIT_KEY });
  });

  it("are gone from the environment before a command loads its module", async () => {
    setEnv({ LOOM_AUDIT_KEY: SECRETS.LOOM_AUDIT_KEY });
    const dir = mkdtempSync(join(tmpdir(), "loom-secrets-"));
    dirs.push(dir);
    const index = new URL("../src/index.ts", import.meta.url).href;
    const module = join(dir, "peek.ts");
    writeFileSync(
      module,
      [
        `import { flow$ } from ${JSON.stringify(index)};`,
        // What a module (or a child it starts as it loads) would find.
        `const seen = process.env.LOOM_AUDIT_KEY ?? null;`,
        `export const peek = flow$("peek", async () => seen);`,
      ].join("\n"),
    );
    const out: string[] = [];
    const io = {
      out: (t: string) => void out.push(t),
      err: () => undefined,
      cwd: dir,
      debug: false,
    };
    expect(await main(["run", module, "peek", "--db", join(dir, "loom.db")], io)).toBe(0);
    expect(JSON.parse(out.join(""))).toMatchObject({ status: "completed", output: null });
  });

  it("reads each key from a file with LOOM_*_FILE, and refuses a variable beside its file form", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-secrets-"));
    dirs.push(dir);
    const keyFile = join(dir, "audit.key");
    writeFileSync(keyFile, "a-key-from-a-file\n", { mode: 0o600 });
    const codecFile = join(dir, "codec.keys");
    writeFileSync(codecFile, `k9:${KEY_HEX}\n`, { mode: 0o600 });
    setEnv({ LOOM_AUDIT_KEY_FILE: keyFile, LOOM_CODEC_KEYS_FILE: codecFile });
    const trust = trustFromEnv(environmentWithSecrets());
    expect(trust.audit).toEqual({ key: "a-key-from-a-file" });
    expect(trust.codec).toBeDefined();
    setEnv({ LOOM_AUDIT_KEY: "another-one" });
    expect(() => environmentWithSecrets()).toThrow(CliError);
    setEnv({ LOOM_AUDIT_KEY_FILE: join(dir, "missing") });
    delete process.env.LOOM_AUDIT_KEY;
    expect(() => environmentWithSecrets()).toThrow(/cannot read LOOM_AUDIT_KEY_FILE/);
  });

  it("parses loom serve's --secret-file, refusing it beside --secret-env", () => {
    const base = ["serve", "flows.ts", "--port", "0"];
    expect(parseCommand([...base, "--secret-file", "/run/secrets/loom"])).toMatchObject({
      name: "serve",
      secretFile: "/run/secrets/loom",
    });
    expect(() =>
      parseCommand([...base, "--secret-file", "/run/secrets/loom", "--secret-env", "S"]),
    ).toThrow(/pass one/);
  });
});

describe("a URL's password in a printed line (R1)", () => {
  const url = "postgres://loom:hunter2-secret@db.internal:5432/prod";

  it("is written *** in the hints that name --pg again", () => {
    const flags = databaseFlags({ db: "./loom.db", pg: { url, schema: "loom" } });
    expect(flags).not.toContain("hunter2-secret");
    expect(flags).toContain("postgres://loom:***@db.internal:5432/prod");
  });

  it("is written *** in every line the CLI prints, errors included", () => {
    const written: string[] = [];
    const capture = (chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    };
    const out = vi.spyOn(process.stdout, "write").mockImplementation(capture);
    const err = vi.spyOn(process.stderr, "write").mockImplementation(capture);
    try {
      const io = processIo();
      io.out(`next page: loom ls --after x --pg '${url}'`);
      io.err(`loom: cannot open ${url}: connection refused`);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
    expect(written.join("")).not.toContain("hunter2-secret");
    expect(written).toHaveLength(2);
  });
});
