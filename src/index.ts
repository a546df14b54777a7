/**
 * Loom: a durable-execution kernel for AI agents.
 *
 * @example
 * import { flow$, createRuntime } from "loomwork";
 * import { sqliteStore } from "loomwork/sqlite";
 *
 * const hello = flow$("hello", async (ctx, input: { name: string }) =>
 *   ctx.run("greet", async () => `hello ${input.name}`));
 * const runtime = createRuntime({ store: sqliteStore("loom.db") });
 * const handle = await runtime.start(hello, { name: "tides" });
 * console.log(await handle.result());
 */
export * from "./kernel/index.ts";
export * from "./fold/index.ts";
export {
  taint,
  untaint,
  isTainted,
  findTaint,
  type Tainted,
  type TaintFinding,
  type TaintMark,
} from "./kernel/taint.ts";
export {
  flow$,
  step$,
  isFlow,
  type Flow,
  type FlowOptions,
  type Effect,
  type EffectContext,
  type StepAttributes,
  type StepDefinitionOptions,
  type TaintingEffect,
} from "./runtime/flow.ts";
export type { FlowContext, RunOptions, SuspendOptions } from "./runtime/context.ts";
export { DEFAULT_TOPIC, type ReceiveOptions, type SendOptions } from "./runtime/inbox.ts";
export { DEDUPE_WINDOW, successorIdOf, type ChainIdentity } from "./kernel/chain.ts";
export type { Outcome } from "./runtime/outcome.ts";
export type { LimiterClaim } from "./effects/effect.ts";
export type { RateLimitOptions } from "./runtime/rate-limits.ts";
export type { DebounceOptions, FlowQueue, StartQueueOptions } from "./runtime/contract.ts";
export type { QueueMark } from "./kernel/queue.ts";
export {
  createRuntime,
  Runtime,
  type RuntimeOptions,
  type StartOptions,
  type ExecutionHandle,
  type ForkOptions,
} from "./runtime/runtime.ts";
export { systemClock } from "./runtime/system.ts";
export { PINNED_KINDS, type Compaction, type CompactOptions } from "./runtime/compaction.ts";
export type { RetentionPolicy } from "./runtime/retention.ts";
export { liveKeepSet, routeKeepSet } from "./runtime/chain-routing.ts";
export type { RestoreOptions, ResumeAsOptions } from "./runtime/restore.ts";
export {
  ChildConflictError,
  ChildFailedError,
  type ChildHandle,
  type SpawnOptions,
} from "./runtime/children.ts";
export { childTree, type ChildNode, type ChildTree } from "./analytics/child-tree.ts";
export type { RestoredRecord } from "./fold/restored.ts";
export { occurrenceId, type OwnedSchedule, type ScheduleOptions } from "./runtime/schedules.ts";
export type { FleetAnswer, FleetMemberRow } from "./runtime/fleet-answer.ts";
export type { ListOptions } from "./runtime/verbs-list.ts";
export type {
  LimiterRow,
  LimiterWaiterRow,
  QueueRow,
  QueuesOptions,
  QueueWaiterRow,
  WaitReason,
} from "./runtime/verbs-flow-control.ts";
export { memoryStore, type MemoryStore } from "./store/memory/index.ts";
export type * from "./store/spi.ts";
export { timeline, type TimelineRow } from "./analytics/timeline.ts";
export {
  chainLineage,
  chainLineageOfStates,
  type ChainLineage,
  type Generation,
} from "./analytics/chain-lineage.ts";
export { continueEvery, type TurnCounter } from "./agent/continue-every.ts";
export { compose, rerunning, type Middleware } from "./effects/compose.ts";
export { retryMiddleware, defaultIsRetryable, type RetryPolicy } from "./effects/retry.ts";
export { meteredFetch } from "./effects/fetch.ts";
export * from "./providers/index.ts";
export {
  isolated,
  IsolatedCrashError,
  type IsolatedOptions,
  type IsolatedEffect,
} from "./effects/isolated.ts";
export {
  budgetAdmission,
  meteringMiddleware,
  defaultMiddleware,
  type EffectMiddleware,
  type MiddlewareContext,
  type BudgetInForce,
  type ExecuteOptions,
} from "./effects/middleware.ts";
export {
  circuitBreaker,
  CircuitOpenError,
  type CircuitBreakerOptions,
  type CircuitState,
} from "./effects/circuit-breaker.ts";
export * from "./remote/index.ts";
export { aesGcmCodec, type AesGcmCodecOptions, type PayloadCodec } from "./trust/codec.ts";
export type { AuditSetting } from "./trust/audit.ts";
export type { VerifyProblem, VerifyReport } from "./trust/verify.ts";
export type { Erasure } from "./runtime/erase-subject.ts";
