/**
 * Builders and checks shared by the conformance suites: envelopes, batches, a started execution,
 * and the store harness that opens (and afterwards closes) the stores a test uses.
 */
import { expect } from "./vitest.ts";
import type { Envelope, EventKind, ExecutionStatus } from "../../kernel/events.ts";
import { isLoomError, type ErrorData } from "../../kernel/errors.ts";
import type { Json } from "../../kernel/json.ts";
import { indexChanges } from "../../fold/index-changes.ts";
import type { AppendBatch, AppendOutcome, Lease, Store, StoreHooks } from "../../store/spi.ts";

/** The suites' clock: every `at` and `nowMs` is near this, far from the wall clock. */
export const T0 = 1_000_000;
export const TTL_MS = 30_000;
export const FLOW = "flow-a";

/** What each suite gets: fresh stores, and a restart when the store under test has one. */
export interface Harness {
  open(hooks?: StoreHooks): Promise<Store>;
  /** Closes `store` and returns a new one over the same data; undefined when not supported. */
  reopen: ((store: Store) => Promise<Store>) | undefined;
}

export function envelope(
  executionId: string,
  seq: number,
  kind: EventKind = seq === 0 ? "EXECUTION_STARTED" : "STEP_STARTED",
  payload: Json = { n: seq },
): Envelope {
  return { executionId, seq, kind, at: T0 + seq * 10, payload };
}

/** `count` envelopes from `from`, with a nested payload and, on odd seqs, kernel meta. */
export function envelopes(executionId: string, from: number, count: number): Envelope[] {
  return Array.from({ length: count }, (_, i) => {
    const seq = from + i;
    const e = envelope(executionId, seq, undefined, {
      n: seq,
      nested: { list: [1, "two", null, true], text: "é \u0000 \u{1F600}" },
    });
    if (seq % 2 === 1) e.meta = { kernel: true, fence: 1 };
    return e;
  });
}

export function batch(
  events: Envelope[],
  fence: number,
  extra: Partial<AppendBatch> = {},
): AppendBatch {
  const first = events[0];
  const executionId = first?.executionId ?? "";
  const expectedSeq = first?.seq ?? 0;
  return {
    executionId,
    events,
    expectedSeq,
    fence,
    status: "running",
    ...(expectedSeq === 0 ? { flow: FLOW } : {}),
    index: indexChanges(events),
    ...extra,
  };
}

export async function acquire(
  store: Store,
  executionId: string,
  owner = "w1",
  nowMs = T0,
): Promise<Lease> {
  const lease = await store.acquireLease(executionId, owner, { ttlMs: TTL_MS, nowMs });
  if (!lease) throw new Error(`test setup: lease on ${executionId} not acquired by ${owner}`);
  return lease;
}

/** Takes the lease and appends sequences 0..count-1; returns the fence. */
export async function start(
  store: Store,
  executionId: string,
  opts: { count?: number; flow?: string; status?: ExecutionStatus; owner?: string } = {},
): Promise<number> {
  const { fence } = await acquire(store, executionId, opts.owner);
  const extra: Partial<AppendBatch> = { flow: opts.flow ?? FLOW, status: opts.status ?? "running" };
  const outcomes = await store.appendMany([
    batch(envelopes(executionId, 0, opts.count ?? 1), fence, extra),
  ]);
  expectAllOk(outcomes);
  return fence;
}

export async function appendOne(store: Store, b: AppendBatch): Promise<AppendOutcome> {
  const outcomes = await store.appendMany([b]);
  expect(outcomes).toHaveLength(1);
  return outcomes[0] as AppendOutcome;
}

export function expectAllOk(outcomes: readonly AppendOutcome[]): void {
  expect(outcomes.map((o) => (o.ok ? "ok" : o.error.code))).toEqual(outcomes.map(() => "ok"));
}

/** Asserts the outcome is a refusal with `code`; returns its error. */
export function expectRefused(outcome: AppendOutcome | undefined, code: string): ErrorData {
  expect(outcome).toBeDefined();
  if (outcome === undefined || outcome.ok) {
    throw new Error(`expected an append refused with ${code}, got ${JSON.stringify(outcome)}`);
  }
  expect(outcome.error.code).toBe(code);
  expect(isLoomError(outcome.error, code)).toBe(true);
  return outcome.error;
}

/** Everything a reader can see of one execution, for before/after comparisons. */
export async function visible(store: Store, executionId: string) {
  const [events, head, listed] = await Promise.all([
    store.read(executionId),
    store.head(executionId),
    store.list(),
  ]);
  return { events, head, summary: listed.find((x) => x.executionId === executionId) };
}
