/**
 * Issue 28 item 1: what a rotation and a generation cost, beside ADR 0109's measured table. These
 * tests pin the mechanisms the conversation bench's figures rest on, never a figure: how long a
 * rotating turn waits is decided by what wakes it, and that is what is checked here.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { flow$, memoryStore, type Store } from "../src/index.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
const chains = (store: Store) =>
  rt(store, { features: { continueAsNew: true }, background: false });

/** The message loop of the conversation bench, rotating after every `every` turns. */
function loop(every: number) {
  return flow$("cost-loop", async (ctx, input: { turn: number } | null) => {
    let turn = input?.turn ?? 0;
    for (;;) {
      const msg = await ctx.suspend<{ text: string }>();
      await ctx.run("turn", () => `reply to ${msg.text}`);
      if (++turn % every === 0) return ctx.continueAsNew({ turn });
    }
  });
}

/** Lets the event loop run `turns` times (setImmediate, which the fake timers leave alone). */
async function spin(turns: number, done: () => Promise<boolean>): Promise<boolean> {
  for (let i = 0; i < turns; i++) {
    if (await done()) return true;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return done();
}

describe("a rotating turn (issue 28)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("D1: the rotation waits for the last step's commit, not for a timer's tick", async () => {
    // With every timer frozen, a rotation that polled its predecessor's quiescence on a timer
    // would never start the successor; one woken by the commit does.
    const store = memoryStore();
    const r = chains(store);
    await r.start(loop(2), null, { id: "chat" });
    await r.resume("chat", { text: "a" });
    vi.useFakeTimers({ toFake: ["setTimeout", "setInterval"] });
    await r.resume("chat", { text: "b" });
    const rotated = await spin(2000, async () => {
      const head = await store.head("chat");
      const last = head < 0 ? undefined : (await store.read("chat", head, 1))[0];
      return last?.kind === "EXECUTION_CONTINUED" && (await store.head("chat~1")) >= 0;
    });
    expect(rotated).toBe(true);
  });
});
