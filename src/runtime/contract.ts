/**
 * The flow contract: what a user's flow is (`Flow`, `FlowOptions`) and what its body may call
 * (`FlowContext` and the options of its syscalls). Types only, so the modules that implement the
 * syscalls (context.ts and the syscall families beside it), the flow definitions (flow.ts) and
 * the runtime all depend on this file and never on each other in a circle (issue 24).
 */
import type { Effect, EffectContext, ExecuteOptions, TaintingEffect } from "../effects/effect.ts";
import type { Json } from "../kernel/json.ts";
import type { Budget } from "../kernel/resources.ts";
import type { StandardSchemaV1 } from "../kernel/schema.ts";
import type { Tainted } from "../kernel/taint.ts";

export interface FlowOptions<I = unknown, O = unknown, In = I> {
  /**
   * The input's schema (any Standard Schema: zod, valibot, arktype, ...). `start` validates the
   * input with it before anything is recorded and records the schema's output; a carry into the
   * next generation (`continueAsNew`) and a child's input (`ctx.spawn`) are validated the same
   * way. A refused input is InvalidInputError with the schema's issues in `details.issues`.
   */
  input?: StandardSchemaV1<In, I>;
  /** The output's schema: a body that returns what fails it fails with InvalidInputError. */
  output?: StandardSchemaV1<unknown, O>;
  /** Declared version; defaults to "1". Change it when a change is not replay-compatible. */
  version?: string;
  /** Older versions this code can replay (their executions recover under it). */
  compatibleVersions?: readonly string[];
  /** What each execution may spend; `start({ budget })` overrides it. */
  budget?: Budget;
  /**
   * How long each execution may run, from its logged start on the runtime clock; past it, the
   * execution is cancelled (DeadlineExceededError). `start({ deadlineMs })` overrides it.
   */
  deadlineMs?: number;
  /**
   * The queue its executions wait in (runtime/queues.ts): a name, or `{ name, key, priority }`
   * where `key(input)` gives an execution's key for the queue's per-key concurrency. A start's
   * own `queue`, `key` and `priority` options override it.
   */
  queue?: FlowQueue<I>;
}

/** A flow's queue (FlowOptions.queue): a name, or a name with a key from the input and a priority. */
export type FlowQueue<I = unknown> =
  string | { name: string; key?: (input: I) => string; priority?: number };

/** A flow's queue as flow$ checked it. */
export interface FlowQueueChecked {
  name: string;
  key?: (input: unknown) => string;
  priority?: number;
}

/** A start's debounce (StartOptions.debounce, runtime/debounce.ts). */
export interface DebounceOptions {
  /** The starts of one key are debounced together. */
  key: string;
  /** How long after the latest start the execution is admitted. */
  ms: number;
  /** The longest it waits after the first start, however many starts follow (default: no cap). */
  maxMs?: number;
}

/** The queue options of a start (StartOptions). */
export interface StartQueueOptions {
  /** The queue to wait in (over the flow's). */
  queue?: string;
  /** Its key in the queue (per-key concurrency): over the flow's `key(input)`. */
  key?: string;
  /** Lower is admitted first (default: the flow's, else 0). */
  priority?: number;
  /** Refused (QueueDuplicateError) while another execution waits in the queue with this key. */
  dedupe?: string;
}

/**
 * A flow: its body takes `I` and returns `O`; `start` takes `In`, which is `I` unless an input
 * schema transforms what it accepts (zod's defaults, say) into what the body gets.
 */
export interface Flow<I = unknown, O = unknown, In = I> {
  readonly kind: "loom.flow";
  readonly name: string;
  readonly version: string;
  readonly compatibleVersions: readonly string[];
  readonly fingerprint: string;
  readonly budget?: Budget;
  readonly deadlineMs?: number;
  /** Its queue (FlowOptions.queue), checked. */
  readonly queue?: FlowQueueChecked;
  /** The input's schema, when the flow declares one (FlowOptions.input). */
  readonly input?: StandardSchemaV1<In, I>;
  /** The output's schema, when the flow declares one (FlowOptions.output). */
  readonly output?: StandardSchemaV1<unknown, O>;
  /** A method, so that a Flow<I, O> is usable wherever a Flow<unknown, unknown> is. */
  body(this: void, ctx: FlowContext, input: I): Promise<O>;
}

export interface SuspendOptions<T = unknown> {
  /** Milliseconds to wait for a resume before the suspend throws SuspendTimeoutError. */
  timeout?: number;
  /**
   * The resume payload's schema (any Standard Schema): the body gets the schema's output, or
   * InvalidInputError listing the issues when the payload fails it. The payload is recorded as it
   * was sent and checked as the body reads it, on every run, so a replay answers the same; a body
   * that catches the refusal may suspend again for a better answer.
   */
  schema?: StandardSchemaV1<unknown, T>;
}

/** Options of a `ctx.run` step. */
export interface RunOptions {
  /**
   * The step fails with StepTimeoutError this long after its first attempt's logged start, on
   * the runtime clock, also across crashes; its signal aborts then. A finite number > 0.
   */
  timeoutMs?: number;
  /**
   * At most once: the step's start is durable before its code runs, and a crash after that is
   * not followed by a re-run: the flow gets InDoubtError instead. Default: at least once.
   */
  atMostOnce?: boolean;
  /**
   * Marks the step's output as tainted from this source (`"tool:search"`): what is recorded,
   * and so what a replay returns, is the wrapper `{ $tainted, value }` (kernel/taint.ts).
   */
  taint?: string;
}

/** What `step` needs to know of a call beyond its name and input. */
export interface FlowContext {
  readonly executionId: string;
  /**
   * Runs `fn` once as a durable step; a re-run returns its recorded result. With `taint`, the
   * result is the taint wrapper of what `fn` returned.
   */
  run<T>(
    name: string,
    fn: (ectx: EffectContext) => Promise<T> | T,
    options: RunOptions & { taint: string },
  ): Promise<Tainted<T>>;
  run<T>(
    name: string,
    fn: (ectx: EffectContext) => Promise<T> | T,
    options?: RunOptions,
  ): Promise<T>;
  /**
   * Runs an effect (or a `step$`) with a recorded input through the middleware chain; `options`
   * (a retry policy, say) override the effect's own for this call. An effect that declares
   * `refusesTainted` throws TaintedInputError, before anything is recorded, for an input that
   * holds a tainted value; one that `taintsOutput` (or a call with `taint`) resolves to a wrapper.
   */
  execute<I, O>(
    effect: TaintingEffect<I, O>,
    input: I,
    options?: ExecuteOptions,
  ): Promise<Tainted<O>>;
  execute<I, O>(
    effect: Effect<I, O>,
    input: I,
    options: ExecuteOptions & { taint: string },
  ): Promise<Tainted<O>>;
  execute<I, O>(effect: Effect<I, O>, input: I, options?: ExecuteOptions): Promise<O>;
  /** Records the value of a synchronous, non-deterministic choice; a re-run gets the same value. */
  decide<T>(name: string, fn: () => T): Promise<T>;
  /** A durable timer: survives restarts; waits above 2^31-1 ms are armed in chunks. */
  sleep(ms: number): Promise<void>;
  /** Sleeps until an epoch-ms time on the runtime clock. */
  sleepUntil(epochMs: number): Promise<void>;
  /** Parks until `runtime.resume(id, payload)` and returns the payload. */
  suspend<T = Json>(options?: SuspendOptions<T>): Promise<T>;
  /** Runs branches concurrently; each is a scope of its own, so its call ids are stable. */
  parallel<T>(branches: readonly ((ctx: FlowContext) => Promise<T>)[]): Promise<T[]>;
  /** The runtime clock's time, recorded so a re-run sees the same value. */
  now(): number;
  /**
   * Asks for more of one budget dimension (ADR 0032 R2): grant = min(request, ceiling - spent),
   * recorded as a decision, so a re-run gets the same grant; the budget's limit in that
   * dimension becomes spent + grant, and spending past it is QUOTA_EXCEEDED as usual.
   */
  negotiateBudget(
    dimension: string,
    request: number,
    options: { ceiling: number },
  ): Promise<number>;
  /**
   * Runs `fn` under a named budget besides the execution's: its effects' spend counts toward
   * both, and its effects are refused once it is spent while the rest of the flow goes on.
   * Budgets of the same name share their spend.
   */
  nestedBudget<T>(name: string, budget: Budget, fn: (ctx: FlowContext) => Promise<T>): Promise<T>;
  /**
   * Takes the next message of the chain's inbox (`runtime.send`), in order, each once; parks
   * until one comes. With `timeout`, throws SuspendTimeoutError when none came in time. With
   * `taint`, the message comes wrapped as tainted from that source.
   */
  receive<T = Json>(options: ReceiveOptions<T> & { taint: string }): Promise<Tainted<T>>;
  receive<T = Json>(options?: ReceiveOptions<T>): Promise<T>;
  /**
   * Ends this generation and continues the chain as a new one (ADR 0109): the successor
   * `<chainId>~<n+1>` starts this flow (the code registered now) with `carry` as its input, and
   * inherits what was spent, the inbox cursors and the chain deadline. Never returns. Needs
   * `features.continueAsNew`; refused (before anything is recorded) from a ctx.parallel branch,
   * with a wait outstanding, or with a carry over `maxCarryBytes`.
   */
  continueAsNew(carry?: unknown): Promise<never>;
  /**
   * Starts `flow` as a child execution `<id>::<key>#<i>` (issue 8): cancelled with this one
   * unless `detached`, within this one's deadline, and spending from this one's budget. The
   * handle is plain JSON (it can travel in a carry). See runtime/children.ts.
   */
  spawn<I, O, In>(
    flow: Flow<I, O, In>,
    ...args: undefined extends In
      ? [input?: NoInfer<In>, options?: SpawnOptions]
      : [input: NoInfer<In>, options?: SpawnOptions]
  ): Promise<ChildHandle<O>>;
  spawn(flow: string, input?: unknown, options?: SpawnOptions): Promise<ChildHandle>;
  /**
   * Waits for a child (a handle, or the id of a child of this chain) to end, following it
   * through its rotations; returns its output, or throws ChildFailedError.
   */
  awaitChild<O>(child: ChildHandle<O>): Promise<O>;
  awaitChild<T = unknown>(child: string): Promise<T>;
}

export interface SpawnOptions {
  /** Names the child: its id is `<parentId>::<key>#<i>` (default: the flow's name). */
  key?: string;
  /** A detached child is not cancelled with its parent, and outlives a rotation (D5). */
  detached?: boolean;
  /** At most this much of the parent's budget (O6), or the child's own when the parent has none. */
  budget?: Budget;
  /** The child's deadline, capped by the parent's (O5). */
  deadlineMs?: number;
}

declare const childOutput: unique symbol;

/**
 * What ctx.spawn returns: plain JSON, so it can travel in a carry (D5). `O` is the child flow's
 * output type, for `ctx.awaitChild` (a type only: no such field exists at run time).
 */
export interface ChildHandle<O = unknown> {
  id: string;
  flow: string;
  detached: boolean;
  /** The child's output type; never set. A method, so handles convert between output types. */
  [childOutput]?(output: O): void;
}

export interface ReceiveOptions<T = unknown> {
  topic?: string;
  /** Milliseconds to wait for a message before the receive throws SuspendTimeoutError. */
  timeout?: number;
  /**
   * Hands the message over tainted from this source (`"inbox:user"`): the body gets the wrapper
   * `{ $tainted, value }` (kernel/taint.ts). The MESSAGE_CONSUMED fact keeps the message as it
   * was sent (a sender may write it, N3); the mark is made as the body reads it, on every run.
   */
  taint?: string;
  /**
   * The message's schema (any Standard Schema): the body gets the schema's output, or
   * InvalidInputError listing the issues. Checked as the body reads the message (the consumed
   * message is recorded as it was sent), before a `taint` mark is put on it.
   */
  schema?: StandardSchemaV1<unknown, T>;
}
