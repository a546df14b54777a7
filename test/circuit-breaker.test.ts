import { describe, expect, it } from "vitest";
import { flow$, isLoomError, memoryStore, step$ } from "../src/index.ts";
import { circuitBreaker, type CircuitState } from "../src/effects/circuit-breaker.ts";
import { defaultMiddleware } from "../src/effects/middleware.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();

describe("circuitBreaker", () => {
  it("opens after N failures in the window, half-opens after openMs, closes on a good probe", async () => {
    let t = 1_000_000;
    let healthy = false;
    const transitions: string[] = [];
    const tool = step$("tool", async () => {
      if (!healthy) throw new Error("down");
      return "up";
    });
    const f = flow$("calls", async (ctx, n: number) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        out.push(
          await ctx.execute(tool, i).catch((e: unknown) => (isLoomError(e) ? e.code : "failed")),
        );
      }
      return out;
    });
    const breaker = circuitBreaker({
      failures: 3,
      windowMs: 1000,
      openMs: 5000,
      onTransition: (target, from: CircuitState, to: CircuitState) =>
        transitions.push(`${target}:${from}->${to}`),
    });
    const r = rt(memoryStore(), {
      clock: { now: () => t },
      background: false,
      middleware: [...defaultMiddleware({ retry: { maxAttempts: 1 } }), breaker],
    }).registerFlow(f);
    const first = await (await r.start(f, 5, { id: "c1" })).result();
    expect(first.output).toEqual([
      "LOOM_APPLICATION",
      "LOOM_APPLICATION",
      "LOOM_APPLICATION",
      "LOOM_CIRCUIT_OPEN",
      "LOOM_CIRCUIT_OPEN",
    ]);
    expect(transitions).toEqual(["tool:closed->open"]);
    t += 5000;
    const probeFails = await (await r.start(f, 1, { id: "c2" })).result();
    expect(probeFails.output).toEqual(["LOOM_APPLICATION"]);
    expect(transitions).toEqual([
      "tool:closed->open",
      "tool:open->half-open",
      "tool:half-open->open",
    ]);
    t += 5000;
    healthy = true;
    const probeOk = await (await r.start(f, 2, { id: "c3" })).result();
    expect(probeOk.output).toEqual(["up", "up"]);
    expect(transitions.slice(3)).toEqual(["tool:open->half-open", "tool:half-open->closed"]);
  });
});
