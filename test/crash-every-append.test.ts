/**
 * Issue 5: each canonical scenario, crashed at every one of its appends (before the commit and
 * after it), recovers to the end state of the run without a crash (sim/scenarios.ts).
 */
import { describe, expect, it } from "vitest";
import { runScenario, SCENARIOS, type ScenarioEnd } from "../sim/scenarios.ts";

describe("a crash at every append", () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario.name} recovers to the same end state`, async () => {
      const clean = await runScenario(scenario);
      expect(clean.appends).toBeGreaterThan(1);
      expect(["completed", "cancelled"]).toContain(clean.status);
      if (scenario.chain) {
        // ADR 0109 D8's frozen criterion: one successor, one EXECUTION_CONTINUED, and every
        // message (four, and a retried duplicate) consumed exactly once.
        expect(clean.generations).toEqual([1, 0]);
        expect(clean.consumed).toEqual([0, 1, 2, 3]);
        expect(clean.output).toEqual({ turn: 4, last: "four" });
      }
      if (scenario.children) {
        // Issue 8: two children, each ended once with its work recorded once, summed.
        expect(clean.output).toBe(30);
        expect(clean.children).toEqual({
          "scenario-1::kid#0": { status: "completed", output: 10, completedSteps: 1 },
          "scenario-1::kid#1": { status: "completed", output: 20, completedSteps: 1 },
        });
      }
      const view = scenario.compare ?? (({ appends: _, ...end }: ScenarioEnd) => end);
      for (let append = 0; append < clean.appends; append++) {
        for (const after of [false, true]) {
          const crashed = await runScenario(scenario, { append, after });
          expect(view(crashed), `crash ${after ? "after" : "before"} append ${append}`).toEqual(
            view(clean),
          );
        }
      }
    });
  }
});
