/**
 * The per-batch checks every store makes inside its append transaction (S2, S3), kept in one
 * place so the stores cannot drift apart.
 */
import { isTerminalStatus, type ExecutionStatus } from "../kernel/events.ts";
import {
  ExecutionEndedError,
  FencedError,
  InvalidInputError,
  SequenceConflictError,
} from "../kernel/errors.ts";
import type { AppendBatch } from "./spi.ts";

/** Throws the error that refuses `batch`, given the stored head, status and lease fence. */
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
  if (leaseFence === undefined || leaseFence !== fence) {
    throw new FencedError(
      `append to ${executionId} with fence ${fence} refused: the lease's fence is ${leaseFence ?? "absent"}`,
      { executionId, fence, leaseFence: leaseFence ?? null },
    );
  }
  if (status !== undefined && isTerminalStatus(status)) {
    throw new ExecutionEndedError(
      `append to ${executionId} refused: its log ended (${status}) at sequence ${head}`,
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
