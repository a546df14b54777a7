/**
 * Red team (ADR 0111; docs/security.md "Ids of the shapes the kernel makes cannot be taken by a
 * caller" and "every verb ... refuses an execution that belongs to another principal"): a verb
 * aimed at an id nobody has started yet must leave nothing behind that changes the owner's start.
 */
import { describe, expect, it } from "vitest";
import { flow$, isLoomError, memoryStore } from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const waits = flow$("waits", async (ctx, input: { who: string }) => {
  const msg = await ctx.suspend<string>();
  return `${input.who}:${msg}`;
});

const verbs: [string, (r: ReturnType<typeof rt>) => Promise<unknown>][] = [
  ["cancel", (r) => r.cancel("x", "squat", { as: "mallory" })],
  ["resume", (r) => r.resume("x", "early", { as: "mallory" })],
  ["send", (r) => r.send("x", "early", { as: "mallory" })],
  ["followToHead", (r) => r.followToHead("x", { as: "mallory" })],
  ["compact", (r) => r.compact("x", { as: "mallory" })],
  ["verifyLog", (r) => r.verifyLog("x", { as: "mallory" })],
  ["waitForCompletion", (r) => r.waitForCompletion("x", { as: "mallory", timeoutMs: 20 })],
];

describe("red team: verbs on an id not yet started", () => {
  for (const [name, verb] of verbs) {
    it(`mallory's ${name} before alice's start leaves alice's execution hers and working`, async () => {
      const store = memoryStore();
      const mallory = rt(store).registerFlow(waits);
      const alice = rt(store).registerFlow(waits);
      await verb(mallory).catch((e: unknown) => (isLoomError(e) ? e.code : e));
      const h = await alice.start(waits, { who: "alice" }, { id: "x", principal: "alice" });
      await until(async () => (await alice.getState("x", { as: "alice" })).status === "parked");
      await alice.resume("x", "go", { as: "alice" });
      expect((await h.result()).output).toBe("alice:go");
    });
  }
});
