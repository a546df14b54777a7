/**
 * What waits, and why (issue 26 item 4): the public verbs that show the queues and rate limiters
 * (runtime.ts `queues`, `limiters`, `waits`), read from the store's views (spi-queues.ts S29,
 * spi-limiters.ts LimiterView), with this runtime's limits and an expected wait for each waiter
 * (flow-control-estimates.ts FE1..FE4). They are the operator's view: every principal's
 * executions. Takes the runtime's state (runtime-state.ts); runtime.ts's Runtime hands it in.
 *
 * Invariants (tests cite FV1..FV6):
 * FV1. `queues()` lists each queue with a waiting execution (store `queueNames`) or named by this
 *      runtime's `queues` option with an active one, by name; its waiters in admission order
 *      (priority, then the time it was recorded), `position` 1-based (1 is admitted next).
 * FV2. `limits` is what this runtime knows: its `queues` entry, `{}` (unlimited, QU4) for a queue
 *      it does not name when it was given `queues`, undefined when it was given none (a viewer
 *      such as `loom ls` without LOOM_QUEUES); likewise a limiter's `limit` from `rateLimits`.
 * FV3. `limiters()` lists each limiter with a grant in its window or a waiter (store
 *      `limiterNames`), and each this runtime names, by name: the window's charges, the calls in
 *      flight, a block's end, and its waiters oldest first, `position` 1-based.
 * FV4. `waits()` maps each waiting execution shown by FV1 or FV3 to why it waits: its queue, key
 *      and position, or its limiter and position (the first place when it holds several); an
 *      admitted execution, or one granted, is not in it.
 * FV5. A limiter's store line holds one place per process and limiter (rate-limits.ts RL10): the
 *      calls a process holds behind its first waiting call wait in that process and are not
 *      shown; a position counts places in the store's line.
 * FV6. Reads only: nothing here writes to the store.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { LimiterView, RateLimit, Store } from "../store/spi.ts";
import type { LimiterRow, QueueRow, QueuesOptions, WaitReason } from "./flow-control-types.ts";
import { limiterWait, meanOf, queueWaits } from "./flow-control-estimates.ts";
import { checkedRateLimits } from "./rate-limits.ts";
import type { RuntimeState } from "./runtime-state.ts";

export type {
  LimiterRow,
  LimiterWaiterRow,
  QueueRow,
  QueuesOptions,
  QueueWaiterRow,
  WaitReason,
} from "./flow-control-types.ts";

const DEFAULT_SHOWN = 100;
const MAX_SHOWN = 1000;
/** FE1: ended executions scanned (newest first) for hold times, and the samples kept per queue. */
const ENDED_SCANNED = 200;
const HOLD_SAMPLES = 20;
/** How far into a log its EXECUTION_ADMITTED is looked for (debounces come before it). */
const ADMITTED_WITHIN = 16;

/** FV1, FV2 (runtime.ts `queues`). */
export async function queues(s: RuntimeState, options: QueuesOptions = {}): Promise<QueueRow[]> {
  s.assertOpen();
  const limit = shownOf(options);
  const nowMs = s.clock.now();
  const names = new Set([...(await s.store.queueNames()), ...Object.keys(s.queues)]);
  const views = [];
  for (const name of [...names].sort()) {
    const view = await s.store.queueView(name, { nowMs, limit });
    if (view.active > 0 || view.waitingCount > 0) views.push(view);
  }
  // FE1: hold times only tell a wait by known limits; none are read without them.
  const needed = s.options.queues !== undefined && views.some((v) => v.waitingCount > 0);
  const holds = needed ? await holdTimes(s.store) : new Map<string, number[]>();
  return views.map((view): QueueRow => {
    const limits = s.options.queues === undefined ? undefined : (s.queues[view.queue] ?? {});
    const meanHoldMs = meanOf(holds.get(view.queue) ?? []);
    const waits = queueWaits(view, limits, meanHoldMs, nowMs);
    const row: QueueRow = {
      name: view.queue,
      active: view.active,
      activeByKey: view.activeByKey,
      waitingCount: view.waitingCount,
      waiting: view.waiting.map((w, i) =>
        defined({ ...w, position: i + 1, expectedWaitMs: waits[i] }),
      ),
    };
    if (limits !== undefined) row.limits = limits;
    if (meanHoldMs !== undefined) row.meanHoldMs = meanHoldMs;
    return row;
  });
}

/** FV3, FV2, FV5 (runtime.ts `limiters`). */
export async function limiters(s: RuntimeState): Promise<LimiterRow[]> {
  s.assertOpen();
  const known =
    s.options.rateLimits === undefined ? undefined : checkedRateLimits(s.options.rateLimits);
  const names = new Set([...(await s.store.limiterNames()), ...Object.keys(known ?? {})]);
  const nowMs = s.clock.now();
  const rows: LimiterRow[] = [];
  for (const name of [...names].sort()) {
    const view = await s.store.limiterView(name, nowMs);
    rows.push(limiterRow(view, known?.[name], nowMs));
  }
  return rows;
}

function limiterRow(view: LimiterView, limit: RateLimit | undefined, nowMs: number): LimiterRow {
  const row: LimiterRow = {
    name: view.limiter,
    requests: view.requests,
    inputTokens: view.inputTokens,
    outputTokens: view.outputTokens,
    inFlight: view.inFlight,
    waiting: view.waiting.map((w, i) =>
      defined({
        executionId: w.executionId,
        id: w.id,
        position: i + 1,
        sinceMs: w.sinceMs,
        expectedWaitMs: limiterWait(view, limit, i + 1, nowMs),
      }),
    ),
  };
  if (limit !== undefined) row.limit = limit;
  if (view.blockedUntilMs !== undefined) row.blockedUntilMs = view.blockedUntilMs;
  return row;
}

/** FV4 (runtime.ts `waits`): each waiting execution shown, and why it waits. */
export async function waits(
  s: RuntimeState,
  options: QueuesOptions = {},
): Promise<Map<string, WaitReason>> {
  const out = new Map<string, WaitReason>();
  for (const q of await queues(s, options)) {
    for (const w of q.waiting) {
      const why: WaitReason = defined({
        kind: "queue" as const,
        queue: q.name,
        key: w.key,
        position: w.position,
        waitingCount: q.waitingCount,
        notBeforeMs: w.notBeforeMs,
        expectedWaitMs: w.expectedWaitMs,
      });
      out.set(w.executionId, why);
    }
  }
  for (const l of await limiters(s)) {
    for (const w of l.waiting) {
      const held = out.get(w.executionId);
      if (held !== undefined && held.position <= w.position) continue;
      const why = { kind: "limiter" as const, limiter: l.name, position: w.position };
      out.set(w.executionId, defined({ ...why, expectedWaitMs: w.expectedWaitMs }));
    }
  }
  return out;
}

/**
 * FE1: the slot-hold times (admission to end) of the newest ended executions of each queue, at
 * most HOLD_SAMPLES per queue, from one list of the ENDED_SCANNED last updated ended executions.
 */
async function holdTimes(store: Store): Promise<Map<string, number[]>> {
  const ended = await store.list({
    status: ["completed", "failed", "cancelled", "continued"],
    sort: "updated",
    order: "desc",
    limit: ENDED_SCANNED,
  });
  const out = new Map<string, number[]>();
  for (const x of ended) {
    if (x.queue === undefined) continue;
    const got = out.get(x.queue) ?? [];
    if (got.length >= HOLD_SAMPLES) continue;
    const admittedAt = await admittedAtOf(store, x.executionId);
    // Cancelled while queued: it held no slot.
    if (admittedAt === undefined) continue;
    got.push(Math.max(0, x.updatedAtMs - admittedAt));
    out.set(x.queue, got);
  }
  return out;
}

async function admittedAtOf(store: Store, id: string): Promise<number | undefined> {
  try {
    const head = await store.read(id, 0, ADMITTED_WITHIN);
    return head.find((e) => e.kind === "EXECUTION_ADMITTED")?.at;
  } catch {
    // A log that cannot be read (corrupt, sealed with a key not here) tells no hold time.
    return undefined;
  }
}

function shownOf(options: QueuesOptions): number {
  if (options === null || typeof options !== "object") {
    throw new InvalidInputError("queues options must be an object");
  }
  const n = options.limit ?? DEFAULT_SHOWN;
  if (!Number.isSafeInteger(n) || n < 0 || n > MAX_SHOWN) {
    throw new InvalidInputError(
      `queues limit must be an integer 0 to ${MAX_SHOWN}, got ${String(n)}`,
    );
  }
  return n;
}

/** The object without its undefined fields: an absent field, not `undefined`, in its JSON. */
function defined<T extends object>(value: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = v;
  return out as T;
}
