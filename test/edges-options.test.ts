/**
 * Issue 21 item 5: options are validated and registerFlow takes only what flow$ made, each
 * refused before anything is appended.
 */
import { describe, expect, it } from "vitest";
import { flow$, memoryStore, type Flow } from "../src/index.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
const f = flow$("opts", async (ctx, n: number) => ctx.run("x", () => n));

describe("options and flows at the edges (issue 21)", () => {
  for (const [label, bad] of [
    ["null", null],
    ["a string", "opts"],
    ["an array", []],
  ] as const) {
    it(`start with ${label} as its options is InvalidInputError, and nothing is appended`, async () => {
      const r = rt(memoryStore()).registerFlow(f);
      const refused = await r
        .start(f, 1, bad as unknown as { id: string })
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: "LOOM_INVALID_INPUT" });
      expect((refused as Error).message).toMatch(/the options of start must be an object/);
      expect(await r.store.list()).toHaveLength(0);
      // The other verbs the same way.
      await r.start(f, 1, { id: "ok" });
      for (const call of [
        () => r.getState("ok", bad as unknown as object),
        () => r.readLog("ok", bad as unknown as object),
        () => r.cancel("ok", "why", bad as unknown as object),
        () => r.send("ok", "m", bad as unknown as object),
      ]) {
        await expect(call()).rejects.toMatchObject({ code: "LOOM_INVALID_INPUT" });
      }
    });
  }

  it("registerFlow and start take only what flow$ made", async () => {
    const r = rt(memoryStore());
    const fake = { kind: "loom.flow", name: "fake" } as unknown as Flow;
    expect(() => r.registerFlow(fake)).toThrow(/flow\$/);
    await expect(r.start(fake, 1, { id: "f1" })).rejects.toMatchObject({
      code: "LOOM_INVALID_INPUT",
    });
    expect(await r.store.read("f1", 0, 10)).toEqual([]);
    // A copy of a real flow made by spreading is not one either.
    expect(() => r.registerFlow({ ...f })).toThrow(/flow\$/);
  });
});
