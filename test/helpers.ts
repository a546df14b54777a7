import { expect } from "vitest";
import { canonicalJson, foldAll, type Runtime } from "../src/index.ts";

/** A clock the test moves by hand; it also advances with real time so timers fire. */
export function offsetClock(): { now(): number; advance(ms: number): void } {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms) => (offset += ms) };
}

export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
): Promise<void> {
  const giveUp = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > giveUp) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

export async function statusOf(runtime: Runtime, id: string): Promise<string> {
  return (await runtime.getState(id)).status;
}

/**
 * G1: the fold of the log equals the live state, and every snapshot-plus-tail split equals the
 * whole fold (F5).
 */
export async function expectReplayEquality(runtime: Runtime, id: string): Promise<void> {
  const log = await runtime.readLog(id);
  const live = await runtime.getState(id);
  const whole = canonicalJson(foldAll(log));
  expect(whole).toBe(canonicalJson(live));
  for (let k = 0; k < log.length; k++) {
    const prefix = foldAll(log.slice(0, k + 1));
    const resumed = foldAll(log.slice(k + 1), { seq: k, state: prefix });
    expect(canonicalJson(resumed), `split at ${k}`).toBe(whole);
  }
}

/**
 * G1 for every execution a runtime's store holds that is not mid-flight: the fold of its log
 * equals the state the runtime reports (live, or snapshot plus tail). Test files run it after
 * every test, so every flow in the suite is checked, not only the ones a test names.
 */
export async function expectEveryReplayEqual(runtime: Runtime): Promise<void> {
  await runtime.journal.drain();
  for (const x of await runtime.list()) {
    if (x.status === "running" || x.status === "pending") continue;
    const log = await runtime.readLog(x.executionId);
    const state = await runtime.getState(x.executionId);
    expect(canonicalJson(foldAll(log)), x.executionId).toBe(canonicalJson(state));
  }
}
