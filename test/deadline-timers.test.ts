/**
 * ADR 0020 L26: deadline timers are not unref'd. A deadline is not a background task: the timer
 * of a hung step or flow keeps its process alive until the deadline fires, whatever else the
 * runtime unrefs (deadline.ts, its header). Tested end to end in a child process whose only
 * pending work is a deadline, and on the chunked re-arm of a deadline past Node's timer limit.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_TIMER_CHUNK_MS } from "../src/index.ts";
import { armDeadline } from "../src/runtime/deadline.ts";
import { execFile } from "./support/processes.ts";
import { slow } from "./support/slowdown.ts";

const child = join(import.meta.dirname, "support", "deadline-child.ts");

/** Runs the child to its end (execFile rejects unless it exits 0) and reads its outcome. */
async function outcomeOf(which: "flow" | "step"): Promise<unknown> {
  const { stdout } = await execFile(process.execPath, ["--import", "tsx", child, which, "200"], {
    timeoutMs: slow(30_000),
  });
  return JSON.parse(stdout.trim()) as unknown;
}

afterEach(() => vi.restoreAllMocks());

describe("deadline timers keep their process alive (ADR 0020 L26)", () => {
  it("L26, K8.3: a process whose only pending work is a flow's deadline stays up until it fires", async () => {
    expect(await outcomeOf("flow")).toMatchObject({
      status: "cancelled",
      error: { code: "LOOM_DEADLINE_EXCEEDED" },
    });
  });

  it("L26, K8.3: a process whose only pending work is a step's timeoutMs stays up until it fires", async () => {
    expect(await outcomeOf("step")).toMatchObject({
      status: "failed",
      error: { code: "LOOM_STEP_TIMEOUT" },
    });
  });

  it("L26: a deadline past 2^31-1 ms is re-armed in chunks, and every chunk's timer is ref'd", () => {
    const real = globalThis.setTimeout;
    const armed: { callback: () => void; handle: NodeJS.Timeout }[] = [];
    // Each timer armDeadline sets is recorded and replaced by one that never fires on its own:
    // the test runs each chunk's callback itself, as if that chunk had elapsed.
    vi.spyOn(globalThis, "setTimeout").mockImplementation((callback: () => void) => {
      const handle = real(() => undefined, MAX_TIMER_CHUNK_MS);
      armed.push({ callback, handle });
      return handle;
    });
    let nowMs = 1_000;
    const clock = { now: () => nowMs };
    const spanMs = MAX_TIMER_CHUNK_MS * 2 + 5;
    let fired = 0;
    const disarm = armDeadline(clock, nowMs + spanMs, spanMs, () => fired++);
    try {
      for (let chunk = 0; chunk < 2; chunk++) {
        nowMs += MAX_TIMER_CHUNK_MS;
        armed[chunk]?.callback();
      }
      expect(armed).toHaveLength(3); // two chunks, then the last 5 ms
      expect(armed.map((t) => t.handle.hasRef())).toEqual([true, true, true]);
      expect(fired).toBe(0);
      armed[2]?.callback();
      expect(fired).toBe(1);
    } finally {
      disarm();
      for (const t of armed) clearTimeout(t.handle);
    }
  });
});
