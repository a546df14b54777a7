import { afterEach, expect } from "vitest";
import { slow } from "./support/slowdown.ts";
import {
  canonicalJson,
  createRuntime,
  foldAll,
  isLoomError,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../src/index.ts";
import type { Envelope } from "../src/kernel/events.ts";
import { isPlainObject } from "../src/kernel/json.ts";
import { stepHeadOf } from "../src/fold/steps.ts";

/**
 * The name an event records for its call: its payload's `name`, or for a step's event that left
 * it out (schema 1.11.0) the one its call id gives (fold/steps.ts S5).
 */
export function stepNameOf(e: Envelope): string | undefined {
  const p = isPlainObject(e.payload) ? e.payload : {};
  if (typeof p.name === "string") return p.name;
  if (!e.kind.startsWith("STEP_") || typeof p.callId !== "string") return undefined;
  return stepHeadOf(p.callId)?.name;
}

/** A tiny seeded PRNG (mulberry32): the seed alone decides every draw. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Runs `fn` with at most `n` calls in flight. */
export function limiter(n: number) {
  let active = 0;
  const queue: (() => void)[] = [];
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    if (active >= n) await new Promise<void>((r) => queue.push(r));
    active++;
    try {
      return await fn();
    } finally {
      active--;
      queue.shift()?.();
    }
  };
}

/**
 * Runtimes for one test file: each test's runtimes share a store they do not close, get their
 * every execution checked for fold equality after the test, and are closed then.
 */
export function runtimes(): (store: Store, opts?: Partial<RuntimeOptions>) => Runtime {
  const open: Runtime[] = [];
  afterEach(async () => {
    for (const r of open) {
      await expectEveryReplayEqual(r).catch((e: unknown) => {
        if (!isLoomError(e, "LOOM_RUNTIME_CLOSED")) throw e;
      });
    }
    await Promise.all(open.splice(0).map((r) => r.close()));
  });
  return (store, opts = {}) => {
    const r = createRuntime({ store, closeStore: false, pollIntervalMs: 20, ...opts });
    open.push(r);
    return r;
  };
}

/** A clock the test moves by hand; it also advances with real time so timers fire. */
export function offsetClock(): { now(): number; advance(ms: number): void } {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms) => (offset += ms) };
}

/** Polls `cond` until it holds; gives up after `timeoutMs`, scaled by LOOM_TEST_SLOWDOWN. */
export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
): Promise<void> {
  const giveUp = Date.now() + slow(timeoutMs);
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
  const as = await ownerOf(runtime, id);
  const log = await runtime.readLog(id, as);
  const live = await runtime.getState(id, as);
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
    const as = await ownerOf(runtime, x.executionId);
    const log = await runtime.readLog(x.executionId, as);
    const state = await runtime.getState(x.executionId, as);
    expect(canonicalJson(foldAll(log)), x.executionId).toBe(canonicalJson(state));
  }
}

/** Caller options that act as the execution's owner (ADR 0111), read from its sequence 0. */
async function ownerOf(runtime: Runtime, id: string): Promise<{ as?: string }> {
  const first = (await runtime.store.read(id, 0, 1))[0];
  const principal = (first?.payload as { principal?: unknown } | undefined)?.principal;
  return typeof principal === "string" ? { as: principal } : {};
}

/** How long a test waits, scaled by LOOM_TEST_SLOWDOWN (test/support/slowdown.ts). */
export { slow, SLOWDOWN } from "./support/slowdown.ts";
