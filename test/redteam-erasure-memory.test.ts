/**
 * Red team (docs/security.md Erasure: "the subject's key is destroyed and every redacted state is
 * rebuilt from an allow-list"; runtime.ts eraseSubject "makes every payload of data subject
 * `subject` unrecoverable"): after eraseSubject returns, the runtime that erased must not still
 * hand out the subject's payloads from what it holds in memory.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
import { until } from "./helpers.ts";

const open: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close().catch(() => undefined)));
});

const holds = flow$("holds", async (ctx, input: { card: string }) => {
  const r = await ctx.suspend<string>();
  return `${input.card}:${r}`;
});

describe("red team: erasure and memory", () => {
  it("after eraseSubject, neither getState nor heldState of the erasing runtime gives the subject's input", async () => {
    const r = createRuntime({ store: memoryStore(), pollIntervalMs: 20 }).registerFlow(holds);
    open.push(r);
    await r.start(holds, { card: "DAVE-CARD-4111" }, { id: "d1", subject: "dave" });
    await until(async () => (await r.getState("d1")).status === "parked");
    const erasure = await r.eraseSubject("dave");
    expect(erasure.executions).toEqual(["d1"]);
    const seen = JSON.stringify({
      get: await r.getState("d1"),
      held: r.heldState("d1") ?? null,
      log: await r.readLog("d1"),
    });
    expect(seen.includes("DAVE-CARD-4111")).toBe(false);
  });
});
