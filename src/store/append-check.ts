/**
 * The per-batch checks every store makes inside its append transaction (S2, S3, S20), kept in one
 * place so the stores cannot drift apart. The PostgreSQL append routine makes the same checks in
 * SQL (append-routine.ts R3) and builds its errors here.
 */
import { isTerminalStatus, type EventKind, type ExecutionStatus } from "../kernel/events.ts";
import {
  ExecutionEndedError,
  FencedError,
  InvalidInputError,
  SequenceConflictError,
} from "../kernel/errors.ts";
import { checkQueueEntry } from "./queue-admit.ts";
import type { AppendBatch, FleetStore } from "./spi.ts";

/**
 * Throws the error that refuses `batch`, given the stored head, status and lease fence: in this
 * order, a malformed batch (its queue entry too: queue-admit.ts QA1), a stale fence (S3), an ended log (E4, but S20), a sequence conflict
 * (S2).
 */
export function checkBatch(
  batch: AppendBatch,
  head: number,
  leaseFence: number | undefined,
  status?: ExecutionStatus,
): void {
  const { executionId, events, expectedSeq, fence } = batch;
  if (events.length === 0) {
    throw new InvalidInputError(`empty append batch for ${executionId}`);
  }
  events.forEach((e, i) => {
    if (e.executionId !== executionId || e.seq !== expectedSeq + i) {
      throw new InvalidInputError(
        `append batch for ${executionId} is not dense from ${expectedSeq} (event ${i} is ${e.executionId}#${e.seq})`,
      );
    }
  });
  checkQueueEntry(executionId, batch.queue);
  if (leaseFence === undefined || leaseFence !== fence) {
    throw new FencedError(
      `append to ${executionId} with fence ${fence} refused: the lease's fence is ${leaseFence ?? "absent"}`,
      { executionId, fence, leaseFence: leaseFence ?? null },
    );
  }
  if (status !== undefined && isTerminalStatus(status) && !erasureOf(batch, status)) {
    // Only SUBJECT_ERASED events follow an end, and they leave its status (S20).
    throw new ExecutionEndedError(
      `append to ${executionId} refused: its log ended (${status}) at sequence ${head}` +
        (batch.status === status ? "" : `, and a batch may not move it to ${batch.status}`),
      { executionId, status },
    );
  }
  if (expectedSeq !== head + 1) {
    throw new SequenceConflictError(
      `append to ${executionId} expected sequence ${expectedSeq}, but the log's next is ${head + 1}`,
      { executionId, expectedSeq, next: head + 1 },
    );
  }
}

/** The one event kind an ended log takes (S20, E4). */
export const ERASURE_KIND = "SUBJECT_ERASED" satisfies EventKind;

/**
 * S20: whether `batch` may follow the end of a log whose stored status is `status`: it holds
 * SUBJECT_ERASED events only (E4) and leaves the status as it is, so an ended execution never
 * looks live again (claimable, recoverable) because of what its erasure recorded.
 */
export function erasureOf(batch: AppendBatch, status: ExecutionStatus): boolean {
  return batch.status === status && batch.events.every((e) => e.kind === ERASURE_KIND);
}

/**
 * The fence a batch is checked against (S9): a claim creates the lease at fence 1 when no lease
 * row exists; when one exists, a claiming batch is always fenced, whatever its fence.
 */
export function effectiveFence(
  batch: AppendBatch,
  leaseFence: number | undefined,
): number | undefined {
  if (!batch.claimLease) return leaseFence;
  return leaseFence === undefined && batch.fence === 1 ? 1 : undefined;
}

/** Whether a lease may be taken now (S6). */
export function leaseAvailable(
  current: { owner: string | undefined; fence: number; expiresAtMs: number } | undefined,
  owner: string,
  opts: { nowMs: number; takeoverFence?: number },
): boolean {
  if (!current || current.owner === undefined || current.owner === owner) return true;
  if (current.expiresAtMs <= opts.nowMs) return true;
  return opts.takeoverFence !== undefined && opts.takeoverFence === current.fence;
}

/** A claim's options, checked alike by every store before it claims anything (S17). */
export function checkClaim(opts: Parameters<FleetStore["claimRunnable"]>[1]): void {
  const { flows, limit, ttlMs, nowMs } = opts;
  const names: unknown = flows;
  if (!Array.isArray(names) || names.some((f) => typeof f !== "string")) {
    throw new InvalidInputError("claimRunnable: flows must be an array of flow names");
  }
  for (const [name, value] of [
    ["limit", limit],
    ["ttlMs", ttlMs],
    ["nowMs", nowMs],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new InvalidInputError(
        `claimRunnable: ${name} must be a non-negative integer, got ${String(value)}`,
        { [name]: String(value) },
      );
    }
  }
}
