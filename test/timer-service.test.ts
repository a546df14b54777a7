import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_TIMER_CHUNK_MS } from "../src/index.ts";
import { TimerService } from "../src/runtime/timer-service.ts";

afterEach(() => vi.useRealTimers());

describe("TimerService", () => {
  it("arms a wait above 2^31-1 ms in chunks and fires once, at or after its wake time", async () => {
    vi.useFakeTimers();
    const clock = { now: () => Date.now() };
    const fired: number[] = [];
    const timers = new TimerService(clock, async () => {
      fired.push(clock.now());
    });
    const wakeAt = clock.now() + MAX_TIMER_CHUNK_MS * 2 + 1234;
    timers.arm("x", "sleep#0", wakeAt);
    await vi.advanceTimersByTimeAsync(MAX_TIMER_CHUNK_MS);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(MAX_TIMER_CHUNK_MS);
    expect(fired).toEqual([]);
    expect(timers.armed("x", "sleep#0")).toBe(true);
    await vi.advanceTimersByTimeAsync(1234);
    expect(fired).toEqual([wakeAt]);
    await vi.advanceTimersByTimeAsync(MAX_TIMER_CHUNK_MS);
    expect(fired).toHaveLength(1);
  });

  it("judges the wake time on the injected clock, not wall time", async () => {
    vi.useFakeTimers();
    let offset = 0;
    const clock = { now: () => Date.now() + offset };
    const fired: string[] = [];
    const timers = new TimerService(clock, async (_id, callId) => {
      fired.push(callId);
    });
    timers.arm("x", "a", clock.now() + 1000);
    offset = -500;
    await vi.advanceTimersByTimeAsync(1000);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(500);
    expect(fired).toEqual(["a"]);
    timers.arm("x", "b", clock.now() + 1000);
    timers.disarm("x", "b");
    await vi.advanceTimersByTimeAsync(2000);
    expect(fired).toEqual(["a"]);
  });
});
