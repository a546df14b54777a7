/**
 * The simulated clock: every timer of this process (setTimeout, setInterval, setImmediate), Date
 * and performance.now() run on @sinonjs/fake-timers while `body` runs, starting at T0. `now` reads the simulated
 * time; `tick` advances it, running what falls due and the promises they settle.
 */
import FakeTimers from "@sinonjs/fake-timers";

export const T0 = Date.UTC(2026, 0, 1);

export interface SimClock {
  now: () => number;
  tick: (ms: number) => Promise<unknown>;
}

export async function withFakeClock<T>(body: (clock: SimClock) => Promise<T>): Promise<T> {
  const fake = FakeTimers.withGlobal(globalThis).install({
    now: T0,
    toFake: [
      "setTimeout",
      "clearTimeout",
      "setInterval",
      "clearInterval",
      "setImmediate",
      "clearImmediate",
      "Date",
      // The runtime's tick loop times itself with performance.now() (a fleet's wakes read it).
      "performance",
    ],
  });
  try {
    return await body({ now: () => fake.now, tick: (ms) => fake.tickAsync(ms) });
  } finally {
    fake.uninstall();
  }
}
