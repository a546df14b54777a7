/**
 * Typed flows end to end (issue 19): what a flow takes and returns reaches `start`, `result()`,
 * `ctx.spawn` and `ctx.awaitChild`. These are compile-time checks: `npm run typecheck` fails
 * when a type is wrong, and fails on an `@ts-expect-error` line that no longer errors. The runs
 * below make the checked calls real.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import {
  createRuntime,
  flow$,
  memoryStore,
  step$,
  type ChildHandle,
  type ExecutionHandle,
  type Outcome,
} from "../src/index.ts";

const greet = flow$("greet", async (ctx, input: { name: string }) => {
  const text = await ctx.run("compose", () => `hello ${input.name}`);
  return { text, length: text.length };
});

const triage = flow$("triage", async (_ctx, input) => `${input.ticket}:${input.priority}`, {
  input: z.object({ ticket: z.string(), priority: z.enum(["low", "high"]).default("low") }),
});

const parent = flow$("parent", async (ctx) => {
  const child = await ctx.spawn(greet, { name: "kid" });
  expectTypeOf(child).toEqualTypeOf<ChildHandle<{ text: string; length: number }>>();
  const out = await ctx.awaitChild(child);
  expectTypeOf(out).toEqualTypeOf<{ text: string; length: number }>();
  // @ts-expect-error a child's input is checked against its flow's input type
  await ctx.spawn(greet, { wrongField: 42 }).catch(() => undefined);
  const byName = await ctx.awaitChild<number>("parent::other#0").catch(() => 0);
  expectTypeOf(byName).toEqualTypeOf<number>();
  return out.text;
});

describe("typed flows (issue 19)", () => {
  it("start takes the flow's input type and result() resolves to its output type", async () => {
    const runtime = createRuntime({ store: memoryStore() });
    try {
      const h = await runtime.start(greet, { name: "ada" });
      expectTypeOf(h).toEqualTypeOf<ExecutionHandle<{ text: string; length: number }>>();
      const out = await h.result();
      expectTypeOf(out).toEqualTypeOf<Outcome<{ text: string; length: number }>>();
      expect(out.output?.text).toBe("hello ada");

      // @ts-expect-error a field the flow does not take
      await runtime.start(greet, { wrongField: 42 }).catch(() => undefined);
      // @ts-expect-error the input is required when the flow's input type needs one
      await runtime.start(greet).catch(() => undefined);

      // A schema's input type is what start takes (here `priority` has a default).
      const t = await runtime.start(triage, { ticket: "t-1" });
      expectTypeOf(t).toEqualTypeOf<ExecutionHandle<string>>();
      expect((await t.result()).output).toBe("t-1:low");

      // By name, the input and the output are unknown.
      const byName = await runtime.start("greet", { anything: true }).catch(() => undefined);
      expectTypeOf(byName).toEqualTypeOf<ExecutionHandle | undefined>();

      runtime.registerFlow(greet);
      const p = await runtime.start(parent);
      expect((await p.result()).output).toBe("hello kid");
    } finally {
      await runtime.close();
    }
  });

  it("step$ and ctx.execute carry the step's types", () => {
    const search = step$("search", async (q: string) => [q.length]);
    const f = flow$("steps", async (ctx) => {
      const hits = await ctx.execute(search, "tides");
      expectTypeOf(hits).toEqualTypeOf<number[]>();
      // @ts-expect-error a step's input type is checked
      await ctx.execute(search, 42).catch(() => undefined);
      return hits;
    });
    expectTypeOf(f.body).returns.resolves.toEqualTypeOf<number[]>();
    expect(f.name).toBe("steps");
  });

  it("suspend and receive take a schema whose output is what the body gets", () => {
    const f = flow$("waits", async (ctx) => {
      const answer = await ctx.suspend({ schema: z.object({ ok: z.boolean() }) });
      expectTypeOf(answer).toEqualTypeOf<{ ok: boolean }>();
      const message = await ctx.receive({ schema: z.object({ text: z.string() }) });
      expectTypeOf(message).toEqualTypeOf<{ text: string }>();
      return answer.ok && message.text;
    });
    expect(f.name).toBe("waits");
  });
});
