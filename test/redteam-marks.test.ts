/**
 * Red team: content shaped like the kernel's own marks. A step's recorded input that holds a
 * `$erased` key (content the caller chose, not an erasure's tombstone) must not switch off the
 * replay's input check (syscalls-step-machinery.ts D1): a replay that asks the step with another
 * input is NonDeterminismError, as it is for any other input.
 */
import { describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
import { until } from "./helpers.ts";

const world = { amount: 1 };

const pay = flow$("pay", async (ctx, input: { shaped: boolean }) => {
  const ask = input.shaped ? { $erased: "nobody", amount: world.amount } : { amount: world.amount };
  const paid = await ctx.run("pay", () => `paid ${ask.amount}`, {});
  void paid;
  await ctx.suspend();
  return ctx.run("receipt", () => `receipt for ${JSON.stringify(ask)}`);
});

// `ctx.run` records no input; use a step with input via execute.
import { step$ } from "../src/index.ts";
const payStep = step$("payStep", async (i: { amount: number }) => `paid ${i.amount}`);
const pay2 = flow$("pay2", async (ctx, input: { shaped: boolean }) => {
  const ask = input.shaped ? { $erased: "nobody", amount: world.amount } : { amount: world.amount };
  const paid = await ctx.execute(payStep, ask);
  await ctx.suspend();
  return paid;
});

async function replayWithOtherInput(shaped: boolean): Promise<string> {
  world.amount = 1;
  const store = memoryStore();
  const open: Runtime[] = [];
  const make = () => {
    const r = createRuntime({ store, closeStore: false, background: false, leaseTtlMs: 1 });
    r.registerFlow(pay2).registerFlow(pay);
    open.push(r);
    return r;
  };
  try {
    const a = make();
    const id = `p-${shaped}`;
    await a.start(pay2, { shaped }, { id });
    await until(async () => (await a.getState(id)).status === "parked");
    await a.close();
    world.amount = 1_000_000; // the flow now asks the recorded step with another input
    const b = make();
    await b.resume(id, null);
    const outcome = await b.waitForCompletion(id, { timeoutMs: 5000 }).catch((e: unknown) => e);
    const st = await b.getState(id);
    return st.status === "failed"
      ? String(st.error?.code ?? st.error?.name)
      : `${st.status}: ${JSON.stringify((outcome as { output?: unknown }).output)}`;
  } finally {
    await Promise.all(open.map((r) => r.close().catch(() => undefined)));
  }
}

describe("red team: content shaped like $erased", () => {
  it("control: a replay that changes a step's input is refused", async () => {
    // The run stops on NonDeterminismError (it is not completed with the recorded output).
    expect(await replayWithOtherInput(false)).not.toMatch(/^completed/);
  });
  it("a step input carrying a `$erased` key does not switch off the replay's input check", async () => {
    expect(await replayWithOtherInput(true)).not.toMatch(/^completed/);
  });
});
