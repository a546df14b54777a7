import { execFile } from "./support/processes.ts";
import { slow } from "./support/slowdown.ts";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");

/**
 * A child process in which `@modelcontextprotocol/sdk` and `@a2a-js/sdk` are not installed, as
 * far as Node can tell: an ESM resolve hook refuses them to `import`, and a patched
 * `Module._resolveFilename` to `require.resolve` (what `assertPeer` asks). It first proves both
 * refusals hold, then imports the two provider modules and tries to create each effect.
 */
const CHILD = `
import Module, { createRequire, register } from "node:module";
const SDK = /^@(modelcontextprotocol|a2a-js)\\//;
register("data:text/javascript," + encodeURIComponent(\`
  export async function resolve(specifier, context, next) {
    if (\${SDK}.test(specifier)) {
      throw Object.assign(new Error("Cannot find package '" + specifier + "'"), { code: "ERR_MODULE_NOT_FOUND" });
    }
    return next(specifier, context);
  }\`));
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (SDK.test(request)) {
    throw Object.assign(new Error("Cannot find module '" + request + "'"), { code: "MODULE_NOT_FOUND" });
  }
  return resolveFilename.call(this, request, ...rest);
};
const codeOf = (f) => f().then(() => "loaded", (e) => e.code);
const out = {
  blocked: {
    import: await codeOf(() => import("@a2a-js/sdk")),
    resolve: await codeOf(async () => createRequire(import.meta.url).resolve("@a2a-js/sdk")),
  },
};
const refused = (create) => {
  try {
    create();
    return "created";
  } catch (e) {
    return { code: e.code, details: e.details, message: e.message };
  }
};
try {
  const mcp = await import("./src/providers/mcp.ts");
  const a2a = await import("./src/providers/a2a.ts");
  out.mcp = refused(() =>
    mcp.createToolEffect({ tool: "t", transport: { http: { url: "http://127.0.0.1:9/" } } }),
  );
  out.a2a = refused(() => a2a.createA2AEffect({ url: "http://127.0.0.1:9/" }));
} catch (e) {
  out.importFailed = String(e?.message ?? e).split("\\n")[0];
}
console.log(JSON.stringify(out));
`;

async function withoutSdks(): Promise<Record<string, unknown>> {
  const { stdout } = await execFile(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", CHILD],
    { cwd: ROOT, timeoutMs: slow(30_000) },
  );
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>;
}

describe("the MCP and A2A providers load their optional SDKs on first use (issue 19)", () => {
  it("import without their SDK; creating an effect names the package to install", async () => {
    const out = await withoutSdks();
    // The simulation holds: the SDK is out of reach of both import and require.resolve.
    expect(out.blocked).toEqual({ import: "ERR_MODULE_NOT_FOUND", resolve: "MODULE_NOT_FOUND" });
    // A static import of either SDK would fail here.
    expect(out.importFailed).toBeUndefined();
    for (const [which, pkg] of [
      ["mcp", "@modelcontextprotocol/sdk"],
      ["a2a", "@a2a-js/sdk"],
    ] as const) {
      expect(out[which]).toEqual({
        code: "LOOM_MISSING_DEPENDENCY",
        details: { package: pkg, feature: `loomwork/${which}` },
        message: expect.stringContaining(`npm install ${pkg}\``) as unknown,
      });
    }
  });
});
