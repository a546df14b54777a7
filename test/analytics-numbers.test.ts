/** src/analytics/numbers.ts: numbers for people (N1). */
import { describe, expect, it } from "vitest";
import { formatUsd } from "../src/analytics/numbers.ts";
import { timeline } from "../src/analytics/timeline.ts";
import type { Envelope } from "../src/kernel/events.ts";

describe("formatUsd (N1)", () => {
  it("prints a float sum of prices to four significant digits with the currency", () => {
    expect(0.0008399999999999999).not.toBe(0.00084); // what `loom show` printed before
    expect(formatUsd(0.0008399999999999999)).toBe("$0.00084");
    expect(0.1 + 0.0001).toBe(0.10010000000000001); // a sum of two prices
    expect(formatUsd(0.1 + 0.0001)).toBe("$0.1001");
    expect(formatUsd(12.3456789)).toBe("$12.35");
  });

  it("groups thousands and never prints an exponent", () => {
    expect(formatUsd(1234.5678)).toBe("$1,235");
    expect(formatUsd(1e-7)).toBe("$0.0000001");
    expect(formatUsd(0)).toBe("$0");
  });

  it("is what the timeline prints for a metered call's cost", () => {
    const metered: Envelope = {
      executionId: "x",
      seq: 1,
      at: 0,
      kind: "RESOURCE_METERED",
      payload: {
        callId: "llm#0",
        delta: { costUsd: 0.0008399999999999999, priced: { model: "m" } },
      },
    };
    const line = timeline([metered]).find((r) => r.kind === "RESOURCE_METERED");
    expect(line?.text).toContain("$0.00084 (m)");
    expect(line?.text).not.toContain("0.000839999");
  });
});
