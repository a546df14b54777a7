/**
 * What every store shares of queues (spi-queues.ts S26..S29): the checks of a batch's `queue` and
 * of an admission's options, made alike before anything is written, and admission's choice among
 * the waiting executions, so the stores cannot drift apart. PostgreSQL makes the same choice in
 * SQL (postgres/queues.ts) and checks here.
 *
 * QA1. A batch's `queue` is well formed or the batch is refused with InvalidInputError before any
 *      write: a non-empty name, a finite priority, text key and dedupe, a safe-integer notBeforeMs.
 * QA2. `pickAdmitted` walks the waiting candidates in admission order and takes each whose key has
 *      a slot left, until `limit` or the queue's free slots are used: a full key is passed over,
 *      never waited on (S26).
 * QA3. An execution is active while its status is neither `queued` nor terminal, or `queued` with
 *      a live lease at nowMs (`isActive`); waiting while `queued` with a free lease (`isWaiting`).
 */
import { isTerminalStatus, type ExecutionStatus } from "../kernel/events.ts";
import { InvalidInputError, QueueDuplicateError } from "../kernel/errors.ts";
import type { AdmitOptions, QueueEntry } from "./spi-queues.ts";

/** The non-terminal statuses an active execution of a queue may have besides `queued` (QA3). */
export const ACTIVE_STATUSES = ["pending", "running", "parked"] as const;

/** QA1: throws InvalidInputError when `queue` (a batch's) is malformed. */
export function checkQueueEntry(executionId: string, queue: QueueEntry | undefined): void {
  if (queue === undefined) return;
  const bad = (what: string) =>
    new InvalidInputError(`append batch for ${executionId}: its queue's ${what}`, {
      executionId,
    });
  if (queue === null || typeof queue !== "object") throw bad("entry must be an object");
  if (typeof queue.name !== "string" || queue.name === "") throw bad("name must be non-empty text");
  if (typeof queue.priority !== "number" || !Number.isFinite(queue.priority)) {
    throw bad("priority must be a finite number");
  }
  if (queue.key !== undefined && typeof queue.key !== "string") throw bad("key must be text");
  if (queue.dedupe !== undefined && typeof queue.dedupe !== "string") {
    throw bad("dedupe must be text");
  }
  if (queue.notBeforeMs !== undefined && !Number.isSafeInteger(queue.notBeforeMs)) {
    throw bad("notBeforeMs must be a safe integer");
  }
}

/** S26: an admission's options, checked alike by every store before it admits anything. */
export function checkAdmit(owner: string, opts: AdmitOptions): void {
  const fail = (what: string, value: unknown) =>
    new InvalidInputError(`admitQueued: ${what}, got ${String(value)}`, { [what]: String(value) });
  if (typeof owner !== "string" || owner === "") throw fail("owner must be non-empty text", owner);
  if (typeof opts.queue !== "string" || opts.queue === "") {
    throw fail("queue must be non-empty text", opts.queue);
  }
  const flows: unknown = opts.flows;
  if (!Array.isArray(flows) || flows.some((f) => typeof f !== "string")) {
    throw fail("flows must be an array of flow names", flows);
  }
  for (const [name, value] of [
    ["limit", opts.limit],
    ["ttlMs", opts.ttlMs],
    ["nowMs", opts.nowMs],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw fail(`${name} must be a non-negative integer`, value);
    }
  }
  const limits: unknown = opts.limits;
  if (limits === null || typeof limits !== "object") throw fail("limits must be an object", limits);
  for (const [name, value] of [
    ["concurrency", opts.limits.concurrency],
    ["keyConcurrency", opts.limits.keyConcurrency],
  ] as const) {
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
      throw fail(`limits.${name} must be a non-negative integer`, value);
    }
  }
}

/** S27: the refusal of a batch whose dedupe key a queued execution holds. */
export function duplicateError(executionId: string, queue: QueueEntry, existingId: string) {
  return new QueueDuplicateError(
    `execution ${executionId} not recorded: ${existingId} waits in queue ${queue.name} with dedupe key ${JSON.stringify(queue.dedupe)}`,
    { existingId },
  );
}

/** QA3 */
export function isActive(status: ExecutionStatus, leaseLive: boolean): boolean {
  if (status === "queued") return leaseLive;
  return !isTerminalStatus(status);
}

/** QA3 */
export function isWaiting(status: ExecutionStatus, leaseLive: boolean): boolean {
  return status === "queued" && !leaseLive;
}

/** Whether a lease is held and unexpired at nowMs. */
export const leaseLive = (
  lease: { owner: string | undefined | null; expiresAtMs: number } | undefined,
  nowMs: number,
) => lease !== undefined && lease.owner != null && lease.expiresAtMs > nowMs;

/** Admission order (S26): priority ascending, then creation time, then id. */
export function admissionOrder(
  a: { priority: number; createdAtMs: number; executionId: string },
  b: { priority: number; createdAtMs: number; executionId: string },
): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  if (a.createdAtMs !== b.createdAtMs) return a.createdAtMs - b.createdAtMs;
  return a.executionId < b.executionId ? -1 : a.executionId > b.executionId ? 1 : 0;
}

/** What admission counts before it picks: the queue's active executions, in all and by key. */
export interface ActiveCount {
  active: number;
  byKey: Map<string, number>;
}

/**
 * QA2: the candidates to admit, from `waiting` (admissible ones, in admission order, which it
 * may be an iterator over: it stops reading once nothing more can be admitted).
 */
export function pickAdmitted<W extends { key?: string | undefined }>(
  waiting: Iterable<W>,
  count: ActiveCount,
  opts: Pick<AdmitOptions, "limits" | "limit">,
): W[] {
  const { concurrency, keyConcurrency } = opts.limits;
  const room = Math.min(
    opts.limit,
    concurrency === undefined ? Infinity : concurrency - count.active,
  );
  const picked: W[] = [];
  if (room <= 0) return picked;
  const byKey = new Map(count.byKey);
  for (const w of waiting) {
    if (w.key !== undefined && keyConcurrency !== undefined) {
      const n = byKey.get(w.key) ?? 0;
      if (n >= keyConcurrency) continue;
      byKey.set(w.key, n + 1);
    }
    picked.push(w);
    if (picked.length >= room) break;
  }
  return picked;
}
