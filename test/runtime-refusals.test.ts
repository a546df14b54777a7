import { afterEach, describe, expect, it } from "vitest";
import { expectEveryReplayEqual } from "./helpers.ts";
import {
  createRuntime,
  flow$,
  isLoomError,
  memoryStore,
  type Runtime,
  type MemoryStore,
} from "../src/index.ts";

let runtime: Runtime;
let store: MemoryStore;
afterEach(async () => {
  await expectEveryReplayEqual(runtime);
  await runtime.close();
});

const echo = flow$("echo", async (_ctx, input: unknown) => input);

function fresh(): Runtime {
  store = memoryStore();
  runtime = createRuntime({ store, limits: { maxInputBytes: 100 } });
  runtime.registerFlow(echo);
  return runtime;
}

async function refused(p: Promise<unknown>, code: string): Promise<string> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(isLoomError(e, code), `expected ${code}, got ${String(e)}`).toBe(true);
  expect(await store.list()).toEqual([]);
  return (e as Error).message;
}

describe("bad input is refused before anything is appended (W4)", () => {
  it("refuses an input with no JSON form and names where", async () => {
    fresh();
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    expect(await refused(runtime.start("echo", { f: () => 1 }), "LOOM_INVALID_INPUT")).toContain(
      "$.f is a function",
    );
    expect(await refused(runtime.start("echo", { a: [cyclic] }), "LOOM_INVALID_INPUT")).toContain(
      "$.a[0].self is a cycle",
    );
    expect(await refused(runtime.start("echo", { n: 10n }), "LOOM_INVALID_INPUT")).toContain(
      "BigInt",
    );
    expect(await refused(runtime.start("echo", { n: NaN }), "LOOM_INVALID_INPUT")).toContain("NaN");
    expect(await refused(runtime.start("echo", new Map()), "LOOM_INVALID_INPUT")).toContain("Map");
  });

  it("refuses an oversized input with its size and the limit", async () => {
    fresh();
    const msg = await refused(runtime.start("echo", "x".repeat(200)), "LOOM_PAYLOAD_TOO_LARGE");
    expect(msg).toContain("202 bytes, over the limit of 100");
  });

  it("refuses an unknown flow, naming the registered ones", async () => {
    fresh();
    expect(await refused(runtime.start("nope", {}), "LOOM_UNKNOWN_FLOW")).toContain('"echo"');
  });

  it("refuses malformed ids", async () => {
    fresh();
    for (const id of ["", "has space", "x".repeat(201), "__loom_x", "-lead", "new\nline"]) {
      await refused(runtime.start("echo", {}, { id }), "LOOM_INVALID_ID");
    }
  });

  it("refuses a resume of an unknown or ended execution", async () => {
    fresh();
    await refused(runtime.resume("ghost", {}), "LOOM_NOT_FOUND");
    const h = await runtime.start("echo", 1, { id: "done" });
    await h.result();
    const e = await runtime.resume("done", {}).catch((err: unknown) => err);
    expect(isLoomError(e, "LOOM_NOT_RESUMABLE")).toBe(true);
    expect((await runtime.readLog("done")).length).toBe(2);
  });
});

describe("a caller-chosen id is a durable idempotent start (W5)", () => {
  it("returns the existing execution for the same flow and input", async () => {
    fresh();
    const a = await runtime.start("echo", { k: 1, j: 2 }, { id: "same" });
    const b = await runtime.start("echo", { j: 2, k: 1 }, { id: "same" });
    expect(b.id).toBe(a.id);
    expect(await b.result()).toEqual({ status: "completed", output: { k: 1, j: 2 } });
    const starts = (await runtime.readLog("same")).filter((e) => e.kind === "EXECUTION_STARTED");
    expect(starts).toHaveLength(1);
  });

  it("refuses the same id with another input or another flow", async () => {
    fresh();
    runtime.registerFlow(flow$("other", async () => 1));
    await (await runtime.start("echo", { k: 1 }, { id: "taken" })).result();
    const e1 = await runtime.start("echo", { k: 2 }, { id: "taken" }).catch((e: unknown) => e);
    expect(isLoomError(e1, "LOOM_EXECUTION_CONFLICT")).toBe(true);
    const e2 = await runtime.start("other", { k: 1 }, { id: "taken" }).catch((e: unknown) => e);
    expect((e2 as Error).message).toContain('flow "echo", not "other"');
    expect((await runtime.readLog("taken")).length).toBe(2);
  });

  it("survives a restart: the same start on a new runtime adopts the stored execution", async () => {
    fresh();
    await (await runtime.start("echo", "x", { id: "kept" })).result();
    const again = createRuntime({ store: store.reopen(), closeStore: false });
    again.registerFlow(echo);
    const h = await again.start("echo", "x", { id: "kept" });
    expect(await h.result()).toEqual({ status: "completed", output: "x" });
    await again.close();
  });
});
