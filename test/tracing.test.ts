// Tracing (runtime/tracing.ts T1..T5): spans through @opentelemetry/api, exported in memory.
import { AsyncLocalStorage } from "node:async_hooks";
import { afterEach, describe, expect, it } from "vitest";
import {
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  SpanStatusCode,
  context,
  trace,
  type Context,
  type ContextManager,
  type Span,
  type Tracer,
  type TracerProvider,
} from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import {
  flow$,
  memoryStore,
  step$,
  type Flow,
  type MemoryStore,
  type RuntimeOptions,
} from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { openAiEffect } from "../src/providers/openai.ts";
import { fakeAnthropic, fakeOpenAi } from "../src/testing/index.ts";
import { offsetClock, runtimes, until } from "./helpers.ts";

const makeRuntime = runtimes();

/** A tracer provider that keeps every finished span. */
function recorder() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const spans = () => exporter.getFinishedSpans();
  return {
    provider,
    spans,
    named: (prefix: string) => spans().filter((s) => s.name.startsWith(prefix)),
  };
}

type Recorder = ReturnType<typeof recorder>;
type Finished = ReturnType<Recorder["spans"]>[number];

function rt(
  store: MemoryStore,
  flows: Flow[],
  rec: Recorder | undefined,
  opts: Partial<RuntimeOptions> = {},
) {
  const r = makeRuntime(store, {
    background: false,
    ...(rec ? { tracerProvider: rec.provider } : {}),
    ...opts,
  });
  for (const f of flows) r.registerFlow(f);
  return r;
}

const parentOf = (s: Finished) => s.parentSpanContext?.spanId;
const idOf = (s: Finished) => s.spanContext().spanId;

afterEach(() => {
  trace.disable();
  context.disable();
});

/** A context manager over AsyncLocalStorage (what @opentelemetry/context-async-hooks does). */
function alsContextManager(): ContextManager {
  const als = new AsyncLocalStorage<Context>();
  const manager = {
    active: () => als.getStore() ?? ROOT_CONTEXT,
    with: (
      ctx: Context,
      fn: (...args: unknown[]) => unknown,
      thisArg?: unknown,
      ...args: unknown[]
    ) => als.run(ctx, () => fn.call(thisArg, ...args)),
    bind: <T>(_: unknown, target: T) => target,
    enable: () => manager,
    disable: () => manager,
  };
  return manager as unknown as ContextManager;
}

describe("tracing: executions and steps", () => {
  it("T2/T3: a flow of three steps is one execution span with three step children", async () => {
    const rec = recorder();
    const tripled = step$("triple", async (n: number) => n * 3);
    const f = flow$("three", async (ctx) => {
      const a = await ctx.run("a", () => 1);
      const b = await ctx.run("b", async () => a + 1);
      return ctx.execute(tripled, b);
    });
    const r = rt(memoryStore(), [f], rec);
    const out = await (await r.start(f, null, { id: "t3" })).result();
    expect(out).toEqual({ status: "completed", output: 6 });

    const [exec, ...others] = rec.named("loom.execution");
    expect(others).toHaveLength(0);
    expect(exec?.name).toBe("loom.execution three");
    expect(exec?.attributes).toMatchObject({
      "loom.execution.id": "t3",
      "loom.flow": "three",
      "loom.flow.version": "1",
      "loom.execution.replayed": false,
      "loom.execution.status": "completed",
    });
    expect(exec?.status.code).toBe(SpanStatusCode.UNSET);
    expect(exec?.attributes["loom.chain.id"]).toBeUndefined();

    const steps = rec.named("loom.step");
    expect(steps.map((s) => s.name)).toEqual(["loom.step a", "loom.step b", "loom.step triple"]);
    expect(steps.map((s) => s.attributes["loom.step.id"])).toEqual(["a#0", "b#0", "triple#0"]);
    expect(steps.map((s) => s.attributes["loom.step.kind"])).toEqual(["run", "run", "effect"]);
    expect(steps.map((s) => s.attributes["loom.step.attempt"])).toEqual([1, 1, 1]);
    for (const s of steps) {
      expect(parentOf(s)).toBe(exec && idOf(exec));
      expect(s.spanContext().traceId).toBe(exec?.spanContext().traceId);
      expect(s.status.code).toBe(SpanStatusCode.UNSET);
    }
  });

  it("a failing step's span has ERROR status, and so has the execution it failed", async () => {
    const rec = recorder();
    const f = flow$("fails", async (ctx) => {
      await ctx.run("ok", () => 1);
      await ctx.run("boom", () => {
        throw new Error("the disk is full");
      });
    });
    const r = rt(memoryStore(), [f], rec);
    const out = await (await r.start(f, null, { id: "fail-1" })).result();
    expect(out.status).toBe("failed");

    const [ok, boom] = rec.named("loom.step");
    expect(ok?.status.code).toBe(SpanStatusCode.UNSET);
    expect(boom?.name).toBe("loom.step boom");
    expect(boom?.status).toEqual({ code: SpanStatusCode.ERROR, message: "the disk is full" });
    expect(boom?.events.map((e) => e.name)).toContain("exception");
    const [exec] = rec.named("loom.execution");
    expect(exec?.attributes["loom.execution.status"]).toBe("failed");
    expect(exec?.status.code).toBe(SpanStatusCode.ERROR);
    expect(exec?.status.message).toContain("the disk is full");
  });

  it("a retried effect's failed attempts are events on its one span, with the last attempt", async () => {
    const rec = recorder();
    let calls = 0;
    const flaky = step$(
      "flaky",
      async () => {
        if (++calls < 3) throw new Error(`try ${calls} failed`);
        return "fine";
      },
      { retry: { maxAttempts: 3, initialDelayMs: 1, jitter: 0 } },
    );
    const f = flow$("retries", async (ctx) => ctx.execute(flaky, null));
    const r = rt(memoryStore(), [f], rec);
    expect((await (await r.start(f, null, { id: "retry-1" })).result()).output).toBe("fine");

    const steps = rec.named("loom.step");
    expect(steps).toHaveLength(1);
    const retries = steps[0]?.events.filter((e) => e.name === "loom.step.retry") ?? [];
    expect(retries.map((e) => e.attributes?.["loom.step.attempt"])).toEqual([1, 2]);
    expect(retries[0]?.attributes?.["exception.message"]).toBe("try 1 failed");
    expect(steps[0]?.attributes["loom.step.attempt"]).toBe(3);
    expect(steps[0]?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("T4: a cancelled execution ends its span cancelled, and the step it cut short", async () => {
    const rec = recorder();
    let hanging = false;
    const f = flow$("waits", async (ctx) => {
      await ctx.run("first", () => 1);
      await ctx.run("hang", ({ signal }) => {
        hanging = true;
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => reject(signal.reason as Error));
        });
      });
    });
    const r = rt(memoryStore(), [f], rec);
    const h = await r.start(f, null, { id: "cancel-1" });
    await until(() => hanging);
    expect(await r.cancel("cancel-1", "the user left")).toBe(true);
    expect((await h.result()).status).toBe("cancelled");

    const [exec] = rec.named("loom.execution");
    expect(exec?.attributes["loom.execution.status"]).toBe("cancelled");
    expect(exec?.status.code).toBe(SpanStatusCode.ERROR);
    expect(exec?.status.message).toContain("the user left");
    const [hang] = rec.named("loom.step hang");
    expect(hang?.attributes["loom.step.cancelled"]).toBe(true);
    expect(hang?.status.code).toBe(SpanStatusCode.ERROR);
    expect(hang && parentOf(hang)).toBe(exec && idOf(exec));
    // Ended once, with the drive (T4): nothing later adds a second span for it.
    await new Promise((res) => setTimeout(res, 20));
    expect(rec.named("loom.step hang")).toHaveLength(1);
  });

  it("T2: a park ends a drive; the resume is a new drive, its steps under it", async () => {
    const rec = recorder();
    const f = flow$("chat", async (ctx) => {
      await ctx.run("before", () => 1);
      const msg = await ctx.suspend<string>();
      return ctx.run("after", () => msg.toUpperCase());
    });
    const r = rt(memoryStore(), [f], rec);
    const h = await r.start(f, null, { id: "park-1" });
    await until(() => rec.named("loom.execution").length === 1);
    await r.resume("park-1", "hi");
    expect((await h.result()).output).toBe("HI");

    const [first, second] = rec.named("loom.execution");
    expect(first?.attributes["loom.execution.status"]).toBe("parked");
    expect(first?.attributes["loom.execution.resumed"]).toBeUndefined();
    expect(second?.attributes).toMatchObject({
      "loom.execution.status": "completed",
      "loom.execution.resumed": true,
      "loom.execution.replayed": false,
    });
    const [before] = rec.named("loom.step before");
    const [after] = rec.named("loom.step after");
    expect(before && parentOf(before)).toBe(first && idOf(first));
    expect(after && parentOf(after)).toBe(second && idOf(second));
  });

  it("T3: a re-drive after a crash gives no span to the steps the log answers", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const make = (blocking: boolean) =>
      flow$("work", async (ctx) => {
        const a = await ctx.run("a", () => 1);
        const b = await ctx.run("b", async () => {
          if (blocking) await gate;
          return 2;
        });
        const c = await ctx.run("c", () => 3);
        return a + b + c;
      });
    const crashed = recorder();
    const first = rt(store, [make(true)], crashed, { clock, leaseTtlMs: 1000, ownerId: "A" });
    await first.start("work", null, { id: "w1" });
    // b is running and its start is in the log (R9: written at the next group commit).
    await until(async () => (await first.readLog("w1")).some((e) => e.kind === "STEP_STARTED"));
    expect(crashed.named("loom.step").map((s) => s.name)).toEqual(["loom.step a"]);

    clock.advance(5000);
    const rec = recorder();
    const second = rt(store.reopen(), [make(false)], rec, {
      clock,
      leaseTtlMs: 1000,
      ownerId: "B",
    });
    expect(await second.recoverAbandoned()).toEqual(["w1"]);
    expect(await second.waitForCompletion("w1")).toEqual({ status: "completed", output: 6 });
    release();

    const execs = rec.named("loom.execution");
    expect(execs).toHaveLength(1);
    expect(execs[0]?.attributes["loom.execution.replayed"]).toBe(true);
    const steps = rec.named("loom.step");
    expect(steps.map((s) => s.name)).toEqual(["loom.step b", "loom.step c"]);
    // b's start was recorded before the crash: this is its second attempt.
    expect(steps[0]?.attributes["loom.step.attempt"]).toBe(2);
    expect(steps.every((s) => parentOf(s) === idOf(execs[0] as Finished))).toBe(true);
  });

  it("a chain's generations carry its id and generation; a continued drive names its successor", async () => {
    const rec = recorder();
    const f = flow$("gen", async (ctx, n: number) => {
      await ctx.run("work", () => n);
      return n < 1 ? ctx.continueAsNew(n + 1) : n;
    });
    const r = rt(memoryStore(), [f], rec, { features: { continueAsNew: true } });
    await r.start(f, 0, { id: "c1" });
    await until(() => rec.named("loom.execution").length === 2);

    const [first, second] = rec.named("loom.execution");
    expect(first?.attributes["loom.execution.status"]).toBe("continued");
    expect(first?.attributes["loom.execution.continued_to"]).toBe(
      second?.attributes["loom.execution.id"],
    );
    expect(second?.attributes).toMatchObject({
      "loom.chain.id": "c1",
      "loom.chain.generation": 1,
      "loom.execution.status": "completed",
    });
  });

  it("T2/T3: under a context manager, a drive is a child of its caller's span, and a step's code runs under its step's", async () => {
    context.setGlobalContextManager(alsContextManager());
    const rec = recorder();
    const f = flow$("active", async (ctx) =>
      ctx.run("inner", async () => {
        await new Promise((res) => setTimeout(res, 1));
        return trace.getActiveSpan()?.spanContext().spanId ?? "none";
      }),
    );
    const r = rt(memoryStore(), [f], rec);
    const request = rec.provider.getTracer("test").startSpan("request");
    const h = await context.with(trace.setSpan(ROOT_CONTEXT, request), () =>
      r.start(f, null, { id: "active-1" }),
    );
    const out = await h.result();
    request.end();

    const [exec] = rec.named("loom.execution");
    const [inner] = rec.named("loom.step inner");
    expect(exec && parentOf(exec)).toBe(request.spanContext().spanId);
    expect(out.output).toBe(inner && idOf(inner));
  });

  it("T1: a drive whose span does not record starts no step span", async () => {
    const started: string[] = [];
    const nonRecording = (name: string): Span => {
      started.push(name);
      return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    };
    const counting = {
      getTracer: () => ({ startSpan: nonRecording }) as unknown as Tracer,
    } satisfies TracerProvider;
    const f = flow$("quiet", async (ctx) => {
      let n = 0;
      for (const s of ["a", "b", "c"]) n += await ctx.run(s, () => 1);
      return n;
    });
    const r = rt(memoryStore(), [f], undefined, { tracerProvider: counting });
    expect((await (await r.start(f, null, { id: "q1" })).result()).output).toBe(3);
    expect(started).toEqual(["loom.execution quiet"]);
  });

  it("with no SDK registered a flow runs and nothing throws; an SDK registered later is used", async () => {
    trace.disable();
    // The annotate hook is there only while a span records (T1); calling it is safe either way.
    const probe = step$("e", async (_: null, ectx) => {
      ectx.annotate?.({ touched: true });
      return ectx.annotate === undefined ? "absent" : "present";
    });
    const f = flow$("plain", async (ctx) => {
      await ctx.run("a", () => 1);
      return ctx.execute(probe, null);
    });
    const r = rt(memoryStore(), [f], undefined);
    expect(await (await r.start(f, null, { id: "n1" })).result()).toEqual({
      status: "completed",
      output: "absent",
    });

    const rec = recorder();
    trace.setGlobalTracerProvider(rec.provider);
    expect((await (await r.start(f, null, { id: "n2" })).result()).output).toBe("present");
    expect(rec.named("loom.step e")[0]?.attributes["touched"]).toBe(true);
    expect(rec.named("loom.execution").map((s) => s.attributes["loom.execution.id"])).toEqual([
      "n2",
    ]);
    expect(rec.named("loom.step")).toHaveLength(2);
  });
});

describe("tracing: LLM steps carry the GenAI conventions", () => {
  const servers: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  const usage = { inputTokens: 20, cacheReadTokens: 100, cacheWriteTokens: 10 };
  const cases = [
    {
      provider: "anthropic" as const,
      model: "claude-sonnet-4-6",
      finish: "end_turn",
      server: () => fakeAnthropic({ text: "Tides rise and fall twice a day.", ...usage }),
      cache: { read: 100, write: 10 },
    },
    {
      provider: "openai" as const,
      model: "gpt-4o",
      finish: "stop",
      server: () =>
        fakeOpenAi({
          text: "Tides rise and fall twice a day.",
          promptTokens: 130,
          cachedTokens: 100,
          cacheWriteTokens: 10,
        }),
      cache: { read: 100, write: 10 },
    },
  ];

  for (const c of cases) {
    for (const stream of [true, false]) {
      it(`${c.provider} (${stream ? "streaming" : "plain"}): gen_ai.* with the fake's token counts`, async () => {
        const fake = await c.server();
        servers.push(fake);
        const rec = recorder();
        const options = { model: c.model, baseURL: fake.baseURL, stream };
        const llm = c.provider === "anthropic" ? anthropicEffect(options) : openAiEffect(options);
        const f = flow$("asks", async (ctx) =>
          ctx.execute(llm, { messages: [{ role: "user", content: "tides?" }], maxTokens: 200 }),
        );
        const r = rt(memoryStore(), [f], rec);
        const out = await (await r.start(f, null, { id: `llm-${c.provider}-${stream}` })).result();
        expect(out.status).toBe("completed");
        const reported = (out.output as { usage: { outputTokens: number } }).usage;

        const [step] = rec.named("loom.step llm");
        expect(step?.attributes).toMatchObject({
          "loom.step.kind": "effect",
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": c.provider,
          "gen_ai.system": c.provider,
          "gen_ai.request.model": c.model,
          "gen_ai.request.max_tokens": 200,
          "gen_ai.response.model": expect.any(String) as unknown,
          // Input counts the cache reads and writes, as metered: 20 + 100 + 10.
          "gen_ai.usage.input_tokens": 130,
          "gen_ai.usage.output_tokens": reported.outputTokens,
          "gen_ai.usage.cache_read.input_tokens": c.cache.read,
          "gen_ai.usage.cache_creation.input_tokens": c.cache.write,
          "gen_ai.response.finish_reasons": [c.finish],
        });
        expect(reported.outputTokens).toBeGreaterThan(0);
        expect(step?.attributes["loom.llm.cost_usd"]).toBeGreaterThan(0);
        expect(step?.attributes["loom.llm.usage_estimated"]).toBeUndefined();
      });
    }
  }
});
