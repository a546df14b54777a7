/**
 * The published package: what `npm pack` would ship, and the package smoke test
 * (scripts/package-smoke.mjs, S1–S3 in its head) run under this Node with publint and attw.
 *
 * The smoke test packs, installs into a `loom init` project and compiles three times: minutes
 * on a loaded machine, hence the long timeout and no assertion on time.
 */
import { spawn } from "./support/processes.ts";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..");
const TEN_MINUTES_MS = 10 * 60_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A child with npm's and vitest's environment left out, as a user's shell would run it. */
function run(cmd: string, args: readonly string[]): Promise<Run> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(npm_|VITEST|NODE_OPTIONS$)/i.test(k)),
  );
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

interface PackedFile {
  path: string;
  size: number;
}

interface Packed {
  files: PackedFile[];
  size: number;
  unpackedSize: number;
}

let packed: Promise<Packed> | undefined;

function manifestExports(): Record<string, string | Record<string, string>> {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    exports: Record<string, string | Record<string, string>>;
  };
  return manifest.exports;
}

/** `npm pack --dry-run`, once for the file; dist/ is fresh (test/support/build-dist.ts). */
function dryRunPack(): Promise<Packed> {
  packed ??= run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"]).then((r) => {
    expect(r.code, r.stderr).toBe(0);
    return (JSON.parse(r.stdout) as [Packed])[0];
  });
  return packed;
}

describe("the packed package", () => {
  it("ships no tests, benchmarks, simulator, examples or scripts", async () => {
    const { files } = await dryRunPack();
    const stray = files
      .map((f) => f.path)
      .filter((p) => /^(test|bench|sim|examples|scripts)\//.test(p) || p.endsWith(".test.ts"));
    expect(stray).toEqual([]);
  });

  it("ships every target of its exports map", async () => {
    const { files } = await dryRunPack();
    const shipped = new Set(files.map((f) => f.path));
    const exportsMap = manifestExports();
    expect(Object.keys(exportsMap)).toContain("./ai-sdk");
    const targets = Object.values(exportsMap).flatMap((t) =>
      typeof t === "string" ? [t] : Object.values(t),
    );
    expect(targets.map((t) => normalize(t)).filter((t) => !shipped.has(t))).toEqual([]);
  });

  it("ships a .ts source only when a shipped source map names it", async () => {
    const { files } = await dryRunPack();
    const paths = files.map((f) => f.path);
    const named = new Set<string>();
    for (const map of paths.filter((p) => p.endsWith(".js.map") || p.endsWith(".d.ts.map"))) {
      const { sources } = JSON.parse(readFileSync(join(root, map), "utf8")) as {
        sources: string[];
      };
      for (const source of sources) named.add(normalize(join(dirname(map), source)));
    }
    const sources = paths.filter((p) => p.endsWith(".ts") && !p.endsWith(".d.ts"));
    expect(sources.length).toBeGreaterThan(0);
    expect(sources.filter((p) => !named.has(p))).toEqual([]);
  });

  it(
    "installs into a `loom init` project and runs, type-checks and lints clean (smoke test)",
    async () => {
      const r = await run(process.execPath, ["scripts/package-smoke.mjs", "--checks"]);
      const last = r.stdout.trim().split("\n").at(-1) ?? "";
      const summary = JSON.parse(last) as Record<string, unknown>;
      expect({ code: r.code, failed: summary.failed }, r.stderr).toEqual({ code: 0, failed: [] });
      expect(summary).toMatchObject({
        name: "package-smoke",
        ok: true,
        node: process.version,
        abi: process.versions.modules,
        sqlite: "repo",
        typedStart: true,
        publint: "ok",
        attw: "ok",
      });
      expect(summary.packedBytes).toBeGreaterThan(0);
      // Every subpath of the exports map loads (loomwork/ai-sdk among them, issue 27), and
      // loomwork/ai-sdk works with neither of its optional peers installed.
      expect(summary.subpaths).toBe(Object.keys(manifestExports()).length - 1);
      expect(summary.aiSdkWithoutPeers).toBe(true);
    },
    TEN_MINUTES_MS,
  );
});
