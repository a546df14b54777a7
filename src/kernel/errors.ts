/**
 * Typed errors with stable codes.
 *
 * Errors are classified by what the runtime does with them (STYLE 4):
 * - refusals (invalid input, unknown flow, fenced, ...) are raised before anything is appended;
 * - `TerminalError` is recorded and never retried; `RetryableError` carries `retryAfterMs`;
 * - `NonDeterminismError` and `FlowVersionError` stop the run without recording an outcome, so a
 *   fixed deploy can pick the execution up again;
 * - `InvariantViolation` is a bug: crash loudly.
 *
 * Errors that cross the log are data (`{ name, code, message, details }`), so `isLoomError`
 * checks the shape, not the prototype: an error read back from a store is not an instance of
 * anything.
 */
import type { Json } from "./json-value.ts";

export interface ErrorData {
  name: string;
  code: string;
  message: string;
  details?: Json;
}

export class LoomError extends Error {
  readonly code: string;
  readonly details: Json | undefined;

  constructor(code: string, message: string, details?: Json) {
    super(message);
    this.code = code;
    this.details = details;
    this.name = new.target.name;
  }

  toJSON(): ErrorData {
    const data: ErrorData = { name: this.name, code: this.code, message: this.message };
    if (this.details !== undefined) data.details = this.details;
    return data;
  }
}

/**
 * A typed error class with a stable code: `class XError extends defineError("LOOM_X") {}`. An
 * outer layer's class also calls `registerErrorClass(XError.code, XError)`, so it reads back
 * from the log as itself. A subclass that declares `static override readonly code` has that
 * code: a narrower refusal stays an instance of the class existing catches test for.
 */
export function defineError(code: string) {
  return class extends LoomError {
    static readonly code: string = code;
    constructor(message: string, details?: Json) {
      super(new.target.code, message, details);
    }
  };
}

/** A value has no faithful JSON form, or fails a declared shape. */
export class InvalidInputError extends defineError("LOOM_INVALID_INPUT") {}
/**
 * A package that an optional part of Loom is built on (a provider's SDK, a database driver,
 * vitest for the conformance suite) is not installed; the message names what to install.
 */
export class MissingDependencyError extends defineError("LOOM_MISSING_DEPENDENCY") {}
/**
 * Under a cost budget, an effect whose cost cannot be priced (a model the price data does not
 * know) is refused before it runs: supply a price, or allow unpriced costs (issue 20).
 */
export class PriceUnknownError extends defineError("LOOM_PRICE_UNKNOWN") {}
/** An input, output or step payload is over its byte limit. */
export class PayloadTooLargeError extends defineError("LOOM_PAYLOAD_TOO_LARGE") {}
/** An execution id is empty, too long, uses a reserved prefix or characters outside the set. */
export class InvalidIdError extends defineError("LOOM_INVALID_ID") {}
/** No flow of that name is registered with this runtime. */
export class UnknownFlowError extends defineError("LOOM_UNKNOWN_FLOW") {}
/** No execution has that id. */
export class ExecutionNotFoundError extends defineError("LOOM_NOT_FOUND") {}
/** A caller-chosen id already names an execution of another flow or with another input. */
export class ExecutionConflictError extends defineError("LOOM_EXECUTION_CONFLICT") {}
/** A re-run asked for a different syscall than the log recorded at that point. */
export class NonDeterminismError extends defineError("LOOM_NON_DETERMINISM") {}
/** A recorded execution's flow version is not one the registered flow accepts. */
export class FlowVersionError extends defineError("LOOM_FLOW_VERSION") {}
/** An append carried a fence that is no longer the execution's: its owner was replaced. */
export class FencedError extends defineError("LOOM_FENCED") {}
/** An append expected a sequence number another append already took. */
export class SequenceConflictError extends defineError("LOOM_SEQUENCE_CONFLICT") {}
/** Another live owner holds the execution's lease. */
export class LeaseHeldError extends defineError("LOOM_LEASE_HELD") {}
/** An append reached an execution whose log already ended (E4). */
export class ExecutionEndedError extends defineError("LOOM_EXECUTION_ENDED") {}
/** A resume reached an execution that can no longer take one (it has ended). */
export class NotResumableError extends defineError("LOOM_NOT_RESUMABLE") {}
/** `ctx.suspend({ timeoutMs })` was not answered in time. */
export class SuspendTimeoutError extends defineError("LOOM_SUSPEND_TIMEOUT") {}
/** An effect was refused because a budget it would spend from is used up (never retried). */
export class QuotaExceededError extends defineError("LOOM_QUOTA_EXCEEDED") {}
/** `waitForCompletion` gave up before the execution ended. */
export class WaitTimeoutError extends defineError("LOOM_WAIT_TIMEOUT") {}
/** The runtime was closed while the call was in progress. */
export class RuntimeClosedError extends defineError("LOOM_RUNTIME_CLOSED") {}
/** Something the kernel guarantees did not hold: a bug in Loom. */
export class InvariantViolation extends defineError("LOOM_INVARIANT") {}
/** The execution was cancelled (`runtime.cancel`, or its deadline): its in-flight steps stop. */
export class CancelledError extends defineError("LOOM_CANCELLED") {}
/** The execution ran past its `deadlineMs`, counted from its logged start; it is cancelled. */
export class DeadlineExceededError extends defineError("LOOM_DEADLINE_EXCEEDED") {}
/** A step ran past its `timeoutMs`, counted from its first attempt's logged start. */
export class StepTimeoutError extends defineError("LOOM_STEP_TIMEOUT") {}
/**
 * An at-most-once step was interrupted (a crash) after it started: whether its effect happened
 * is unknown, so it is not run again and the flow decides.
 */
export class InDoubtError extends defineError("LOOM_IN_DOUBT") {}
/**
 * Code that records steps through the flow scope (an AI SDK model from `durableModel`, a tool
 * from `durableTools`) ran outside a flow's body: outside any flow, or inside a step's code.
 */
export class NotInFlowError extends defineError("LOOM_NOT_IN_FLOW") {}
/** Thrown by user code: record the failure and never retry it. */
export class TerminalError extends defineError("LOOM_TERMINAL") {}
/** `ctx.continueAsNew` while `features.continueAsNew` is off (ADR 0109 D8: the fleet flag). */
export class ContinueAsNewUnavailableError extends defineError(
  "LOOM_CONTINUE_AS_NEW_UNAVAILABLE",
) {}
/**
 * `ctx.continueAsNew` from a `ctx.parallel` branch, or while a parallel call is open beside it
 * (ADR 0109 D1): a generation ends only when no scope of it is open. An InvalidInputError.
 */
export class ContinueAsNewScopeOpenError extends InvalidInputError {
  static override readonly code: string = "LOOM_CONTINUE_AS_NEW_SCOPE_OPEN";
}
/**
 * `ctx.continueAsNew` with a wait registered and not answered (a receive, sleep or suspend not
 * yet awaited; ADR 0109 D1): that is a park, not a rotation point. An InvalidInputError.
 */
export class ContinueAsNewWaitOutstandingError extends InvalidInputError {
  static override readonly code: string = "LOOM_CONTINUE_AS_NEW_WAIT_OUTSTANDING";
}
/** A successor id already holds a log that does not name this predecessor (ADR 0109 D2 (b)). */
export class ContinuationConflictError extends defineError("LOOM_CONTINUATION_CONFLICT") {}
/** A caller named an id of a chain's next-generation shape (`<id>~<n>`; ADR 0109 D2 (a)). */
export class ReservedSuccessorIdError extends defineError("LOOM_RESERVED_SUCCESSOR_ID") {}
/** Following a chain took more unverified steps than `maxChainHops` (ADR 0109 D2, round 3). */
export class ChainHopLimitError extends defineError("LOOM_CHAIN_HOP_LIMIT") {}
/** A fork point at or after EXECUTION_CONTINUED (ADR 0109 D7): fork the successor instead. */
export class ForkPastContinuationError extends defineError("LOOM_FORK_PAST_CONTINUATION") {}
/** A fork of a chain member whose prefix was compacted away (ADR 0109 D7). */
export class CompactedForkPointError extends defineError("LOOM_COMPACTED_FORK_POINT") {}
/** A compaction through a sequence number no saved snapshot covers (store S14): nothing deleted. */
export class CompactionWithoutSnapshotError extends defineError(
  "LOOM_COMPACTION_WITHOUT_SNAPSHOT",
) {}
/** The caller's principal does not own the execution (ADR 0111: one chain, one owner). */
export class UnauthorizedError extends defineError("LOOM_UNAUTHORIZED") {}
/** A request to a worker server carried no valid signature, or a stale timestamp (remote/). */
export class UnauthenticatedError extends defineError("LOOM_UNAUTHENTICATED") {}
/** A worker could not be reached: a network failure, or no answer within the request timeout. */
export class WorkerUnreachableError extends defineError("LOOM_WORKER_UNREACHABLE") {}
/**
 * A worker answered, but refused to take the request for a reason of its own (a wrong secret, a
 * closing runtime, no room): another worker may take it.
 */
export class WorkerRefusedError extends defineError("LOOM_WORKER_REFUSED") {}
/**
 * A worker took the request and failed while handling it (HTTP 500 with its error): the worker is
 * up, and the failure is most likely the request's, so another worker would fail it too.
 */
export class WorkerFailedError extends defineError("LOOM_WORKER_FAILED") {}
/** A dispatcher found no worker that took the request (each refused or was unreachable). */
export class NoWorkerAvailableError extends defineError("LOOM_NO_WORKER_AVAILABLE") {}
/**
 * An effect that refuses tainted input (`refusesTainted: true`, a shell tool say) was called with
 * a value that holds a taint mark anywhere in it (kernel/taint.ts). Raised before the step starts.
 */
export class TaintedInputError extends defineError("LOOM_TAINTED_INPUT") {}
/** A stored payload names a codec key the runtime's codec does not hold. */
export class CodecKeyError extends defineError("LOOM_CODEC_KEY") {}
/** A stored payload did not decode: wrong key, or its bytes were changed (the GCM tag failed). */
export class CodecError extends defineError("LOOM_CODEC") {}
/**
 * A stored event of an execution's log no longer reads back (its text is not JSON): details
 * `{ executionId, seq }` name the row. The execution is quarantined, not fatal: recovery skips it
 * and goes on with every other one; reading its state or log raises this.
 */
export class LogCorruptError extends defineError("LOOM_LOG_CORRUPT") {}
/**
 * A saved snapshot is not bound to its log's audit chain (trust/snapshot-binding.ts B2): it was
 * ignored and the log folded from its events. Reported (the runtime's `onError`), not thrown;
 * details `{ executionId, seq, problem }`.
 */
export class SnapshotRejectedError extends defineError("LOOM_SNAPSHOT_REJECTED") {}
/** eraseSubject could not end every live execution of the subject, so it destroyed nothing. */
export class SubjectLiveError extends defineError("LOOM_SUBJECT_LIVE") {}
/**
 * A start whose queue `dedupe` key is held by an execution still waiting in that queue (store
 * S27); `details.existingId` names it. Nothing was recorded.
 */
export class QueueDuplicateError extends defineError("LOOM_QUEUE_DUPLICATE") {}

/**
 * Thrown by user code: the attempt may be retried, no sooner than `retryAfterMs`. Recorded with
 * `retryAfterMs` in its details, so it survives the log and a process boundary.
 */
export class RetryableError extends LoomError {
  static readonly code = "LOOM_RETRYABLE";
  readonly retryAfterMs: number | undefined;
  constructor(message: string, opts: { retryAfterMs?: number; details?: Json } = {}) {
    const retryAfterMs = opts.retryAfterMs;
    const details =
      retryAfterMs === undefined
        ? opts.details
        : { ...(isPlainRecord(opts.details) ? opts.details : {}), retryAfterMs };
    super("LOOM_RETRYABLE", message, details);
    this.retryAfterMs = retryAfterMs;
  }
}

function isPlainRecord(v: Json | undefined): v is { [key: string]: Json } {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** An error thrown by application code, as it was recorded in the log. */
export class ApplicationError extends LoomError {
  static readonly code = "LOOM_APPLICATION";
  constructor(message: string, originalName: string, details?: Json) {
    super("LOOM_APPLICATION", message, details);
    this.name = originalName;
  }
}

type ErrorClass = new (message: string, details?: Json) => LoomError;

const KNOWN: Record<string, ErrorClass> = {
  LOOM_INVALID_INPUT: InvalidInputError,
  LOOM_PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  LOOM_INVALID_ID: InvalidIdError,
  LOOM_UNKNOWN_FLOW: UnknownFlowError,
  LOOM_NOT_FOUND: ExecutionNotFoundError,
  LOOM_EXECUTION_CONFLICT: ExecutionConflictError,
  LOOM_NON_DETERMINISM: NonDeterminismError,
  LOOM_FLOW_VERSION: FlowVersionError,
  LOOM_FENCED: FencedError,
  LOOM_SEQUENCE_CONFLICT: SequenceConflictError,
  LOOM_LEASE_HELD: LeaseHeldError,
  LOOM_EXECUTION_ENDED: ExecutionEndedError,
  LOOM_TAINTED_INPUT: TaintedInputError,
  LOOM_CODEC_KEY: CodecKeyError,
  LOOM_CODEC: CodecError,
  LOOM_SUBJECT_LIVE: SubjectLiveError,
  LOOM_QUEUE_DUPLICATE: QueueDuplicateError,
  LOOM_LOG_CORRUPT: LogCorruptError,
  LOOM_SNAPSHOT_REJECTED: SnapshotRejectedError,
  LOOM_NOT_RESUMABLE: NotResumableError,
  LOOM_SUSPEND_TIMEOUT: SuspendTimeoutError,
  LOOM_WAIT_TIMEOUT: WaitTimeoutError,
  LOOM_QUOTA_EXCEEDED: QuotaExceededError,
  LOOM_CONTINUE_AS_NEW_UNAVAILABLE: ContinueAsNewUnavailableError,
  LOOM_CONTINUE_AS_NEW_SCOPE_OPEN: ContinueAsNewScopeOpenError,
  LOOM_CONTINUE_AS_NEW_WAIT_OUTSTANDING: ContinueAsNewWaitOutstandingError,
  LOOM_CONTINUATION_CONFLICT: ContinuationConflictError,
  LOOM_RESERVED_SUCCESSOR_ID: ReservedSuccessorIdError,
  LOOM_CHAIN_HOP_LIMIT: ChainHopLimitError,
  LOOM_FORK_PAST_CONTINUATION: ForkPastContinuationError,
  LOOM_COMPACTED_FORK_POINT: CompactedForkPointError,
  LOOM_COMPACTION_WITHOUT_SNAPSHOT: CompactionWithoutSnapshotError,
  LOOM_UNAUTHORIZED: UnauthorizedError,
  LOOM_UNAUTHENTICATED: UnauthenticatedError,
  LOOM_WORKER_UNREACHABLE: WorkerUnreachableError,
  LOOM_WORKER_REFUSED: WorkerRefusedError,
  LOOM_WORKER_FAILED: WorkerFailedError,
  LOOM_NO_WORKER_AVAILABLE: NoWorkerAvailableError,
  LOOM_RUNTIME_CLOSED: RuntimeClosedError,
  LOOM_INVARIANT: InvariantViolation,
  LOOM_TERMINAL: TerminalError,
  LOOM_NOT_IN_FLOW: NotInFlowError,
  LOOM_CANCELLED: CancelledError,
  LOOM_STEP_TIMEOUT: StepTimeoutError,
  LOOM_DEADLINE_EXCEEDED: DeadlineExceededError,
  LOOM_IN_DOUBT: InDoubtError,
  LOOM_RETRYABLE: class extends RetryableError {
    constructor(message: string, details?: Json) {
      const after = isPlainRecord(details) ? details.retryAfterMs : undefined;
      super(message, {
        ...(typeof after === "number" ? { retryAfterMs: after } : {}),
        ...(details === undefined ? {} : { details }),
      });
      this.name = "RetryableError";
    }
  },
};

/**
 * Makes errors of an outer layer's class (an effect's: `LOOM_CIRCUIT_OPEN`, say) read back from
 * the log as that class, as the kernel's own do. A code is registered once, to one class.
 */
export function registerErrorClass(code: string, ctor: ErrorClass): void {
  if (!code.startsWith("LOOM_"))
    throw new InvariantViolation(`error code ${code} must start with LOOM_`);
  const known = KNOWN[code];
  if (known && known !== ctor) {
    throw new InvariantViolation(`error code ${code} is already registered to ${known.name}`);
  }
  KNOWN[code] = ctor;
}

/** True for a Loom error or its recorded data, optionally of one code. */
export function isLoomError(e: unknown, code?: string): e is ErrorData {
  if (e === null || typeof e !== "object") return false;
  const c = (e as { code?: unknown }).code;
  const m = (e as { message?: unknown }).message;
  if (typeof c !== "string" || !c.startsWith("LOOM_") || typeof m !== "string") return false;
  return code === undefined || c === code;
}

/** Normalises anything thrown into an Error. */
export function ensureError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  if (typeof thrown === "string") return new Error(thrown);
  let text: string;
  try {
    text = JSON.stringify(thrown) ?? String(thrown);
  } catch {
    text = String(thrown);
  }
  return new Error(`non-error thrown: ${text}`);
}

/**
 * The data form of any thrown value, as it is written into the log. An application error's HTTP
 * `status` (as provider SDKs' errors carry it) is kept in its details, so whether it may be
 * retried reads the same from the log or across a process.
 */
export function errorToData(thrown: unknown): ErrorData {
  if (thrown instanceof LoomError) return thrown.toJSON();
  const e = ensureError(thrown);
  const code = (e as { code?: unknown }).code;
  const data: ErrorData = {
    name: e.name || "Error",
    code: typeof code === "string" && code.startsWith("LOOM_") ? code : "LOOM_APPLICATION",
    message: e.message,
  };
  const status = (e as { status?: unknown }).status;
  if (typeof status === "number" && Number.isInteger(status)) data.details = { status };
  return data;
}

/** Rebuilds a thrown value from its recorded data: a known code gives its class back. */
export function errorFromData(data: unknown): LoomError {
  if (data === null || typeof data !== "object") {
    return new ApplicationError("unreadable recorded error", "Error");
  }
  const d = data as Partial<ErrorData>;
  const message = typeof d.message === "string" ? d.message : "unreadable recorded error";
  const name = typeof d.name === "string" ? d.name : "Error";
  const Known = typeof d.code === "string" ? KNOWN[d.code] : undefined;
  if (Known) return new Known(message, d.details);
  if (typeof d.code === "string" && d.code.startsWith("LOOM_") && d.code !== "LOOM_APPLICATION") {
    // A Loom error of a layer the kernel does not know (an effect's): its code and name survive.
    const e = new LoomError(d.code, message, d.details);
    e.name = name;
    return e;
  }
  return new ApplicationError(message, name, d.details);
}

/**
 * A recorded error read defensively (from a log or a caller's state): undefined unless it has a
 * name and a message; a missing code is `fallbackCode`. Never throws.
 */
export function readErrorData(v: unknown, fallbackCode: string): ErrorData | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const o = v as { name?: unknown; message?: unknown; code?: unknown; details?: Json };
  if (typeof o.name !== "string" || typeof o.message !== "string") return undefined;
  const error: ErrorData = {
    name: o.name,
    code: typeof o.code === "string" ? o.code : fallbackCode,
    message: o.message,
  };
  if (o.details !== undefined) error.details = o.details;
  return error;
}
