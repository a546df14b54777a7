/**
 * Issue 22 item 9, written as the exploit: with a codec the log holds an error's message sealed,
 * but the spans exported it in the clear (a step's status, its exception event and stack, a
 * retry's event, the drive's status). With a codec, spans name an error by its type and code
 * only (runtime/tracing.ts T6); without one they keep the message, as before.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SpanStatusCode } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import {
  aesGcmCodec,
  flow$,
  memoryStore,
  step$,
  StepTimeoutError,
  type RuntimeOptions,
} from "../src/index.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
const SECRET = "card 4111-1111-1111-1111 of alice@example.test";

/** Everything a span exports, as text: name, attributes, events, status, resource-free. */
function exported(span: ReadableSpan): string {
  return JSON.stringify({
    name: span.name,
    attributes: span.attributes,
    events: span.events.map((e) => ({ name: e.name, attributes: e.attributes })),
    status: span.status,
    links: span.links,
  });
}

/** A flow whose step fails twice with the secret in its message, and then for good. */
async function failingRun(opts: Partial<RuntimeOptions>): Promise<ReadableSpan[]> {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const charge = step$(
    "charge",
    () => {
      throw new Error(`declined: ${SECRET}`);
    },
    { retry: { maxAttempts: 2, initialDelayMs: 1, jitter: 0 } },
  );
  const slow = step$("slow", () => {
    throw new StepTimeoutError(`timed out reading ${SECRET}`);
  });
  const f = flow$("pay", async (ctx) => {
    await ctx.execute(slow, null).catch(() => null);
    return ctx.execute(charge, null);
  });
  const r = rt(memoryStore(), { background: false, tracerProvider: provider, ...opts });
  r.registerFlow(f);
  const end = await (await r.start(f, null, { id: "pay-1" })).result();
  expect(end.status).toBe("failed");
  return exporter.getFinishedSpans();
}

describe("tracing with a codec (runtime/tracing.ts T6)", () => {
  it("no span carries the message or stack of a failed step, a retry or a failed drive", async () => {
    const codec = aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" });
    const spans = await failingRun({ codec });
    expect(spans.map((s) => s.name).sort()).toEqual([
      "loom.execution pay",
      "loom.step charge",
      "loom.step slow",
    ]);
    for (const span of spans) {
      expect(exported(span)).not.toContain("alice@example.test");
      expect(exported(span)).not.toContain("declined");
    }
    // What is left is enough to tell what failed: the type, and the code where there is one.
    const byName = new Map(spans.map((s) => [s.name, s]));
    expect(byName.get("loom.step slow")?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: "LOOM_STEP_TIMEOUT",
    });
    expect(byName.get("loom.step slow")?.attributes).toMatchObject({
      "error.type": "StepTimeoutError",
      "loom.error.code": "LOOM_STEP_TIMEOUT",
    });
    const charge = byName.get("loom.step charge");
    expect(charge?.status).toEqual({ code: SpanStatusCode.ERROR, message: "Error" });
    expect(charge?.events.map((e) => [e.name, e.attributes])).toEqual([
      [
        "loom.step.retry",
        { "loom.step.attempt": 1, "loom.step.retry_in_ms": 1, "error.type": "Error" },
      ],
      ["exception", { "exception.type": "Error" }],
    ]);
    // The drive failed with the step's error as the log keeps it: an application error.
    expect(byName.get("loom.execution pay")?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: "LOOM_APPLICATION",
    });
  });

  it("without a codec the spans keep the message, as docs/tracing.md says", async () => {
    const spans = await failingRun({});
    expect(spans.some((s) => exported(s).includes("alice@example.test"))).toBe(true);
  });
});
