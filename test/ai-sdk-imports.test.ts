/**
 * Issue 27: the root entry imports nothing from the AI SDK, and loomwork/ai-sdk itself imports
 * `ai` and `@ai-sdk/provider` for their types only (src/ai-sdk/README.md). A child process in
 * which `ai` and every `@ai-sdk/*` package are out of reach, as far as Node can tell (an ESM
 * resolve hook refuses them to `import`, a patched `Module._resolveFilename` to `require`),
 * first proves both refusals hold, then imports the sources and the built dist/ (built by
 * test/support/build-dist.ts) of both entries, and makes a durable model of a hand-written v4
 * model: a load of either SDK anywhere below them would fail there.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { execFile } from "./support/processes.ts";
import { slow } from "./support/slowdown.ts";

const ROOT = join(import.meta.dirname, "..");

const CHILD = `
import Module, { createRequire, register } from "node:module";
const SDK = /^(ai|@ai-sdk\\/[^/]+)(\\/|$)/;
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
const codeOf = (f) => f().then(() => "loaded", (e) => e.code ?? String(e));
const require = createRequire(import.meta.url);
const out = {
  blocked: {
    ai: await codeOf(() => import("ai")),
    provider: await codeOf(() => import("@ai-sdk/provider")),
    openai: await codeOf(() => import("@ai-sdk/openai")),
    requireAi: await codeOf(async () => require("ai")),
  },
  loaded: {},
};
for (const entry of ["./src/index.ts", "./src/ai-sdk/index.ts", "./dist/index.js", "./dist/ai-sdk/index.js"]) {
  out.loaded[entry] = await codeOf(() => import(entry));
}
const { durableModel } = await import("./dist/ai-sdk/index.js");
const model = durableModel({
  specificationVersion: "v4", provider: "hand.written", modelId: "m", supportedUrls: {},
  doGenerate: async () => { throw new Error("not called"); },
  doStream: async () => { throw new Error("not called"); },
});
out.durable = { provider: model.provider, modelId: model.modelId };
out.sdkModules = Object.keys(require.cache).filter((p) => /node_modules\\/(ai|@ai-sdk)\\//.test(p));
console.log(JSON.stringify(out));
`;

describe("the AI SDK stays out of what does not use it (issue 27)", () => {
  it("the root entry and loomwork/ai-sdk, from src/ and dist/, load without `ai` or any @ai-sdk package", async () => {
    const { stdout } = await execFile(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", CHILD],
      { cwd: ROOT, timeoutMs: slow(30_000) },
    );
    const out = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>;
    // The simulation holds: the SDK is out of reach of import and require alike.
    expect(out.blocked).toEqual({
      ai: "ERR_MODULE_NOT_FOUND",
      provider: "ERR_MODULE_NOT_FOUND",
      openai: "ERR_MODULE_NOT_FOUND",
      requireAi: "MODULE_NOT_FOUND",
    });
    expect(out.loaded).toEqual({
      "./src/index.ts": "loaded",
      "./src/ai-sdk/index.ts": "loaded",
      "./dist/index.js": "loaded",
      "./dist/ai-sdk/index.js": "loaded",
    });
    expect(out.durable).toEqual({ provider: "hand.written", modelId: "m" });
    expect(out.sdkModules).toEqual([]);
  });
});
