/** The runtime's options and the handle it returns. */
import type { TracerProvider } from "@opentelemetry/api";
import type { Clock, IdSource } from "../kernel/clock.ts";
import type { Limits } from "../kernel/limits.ts";
import type { QueueLimits, Store } from "../store/spi.ts";
import type { DebounceOptions, StartQueueOptions } from "./contract.ts";
import type { RateLimitOptions } from "./rate-limits.ts";
import type { Budget } from "../kernel/resources.ts";
import type { ModelPrice } from "../kernel/prices.ts";
import type { EffectMiddleware } from "../effects/middleware.ts";
import type { Outcome } from "./outcome.ts";
import type { LiveDelta } from "../effects/deltas.ts";
import type { PayloadCodec } from "../trust/codec.ts";
import type { AuditSetting } from "../trust/audit.ts";

/**
 * How far `ctx.negotiateBudget` may raise a budget, per dimension, set outside every flow body
 * (issue 20): a flow's own `{ ceiling }` can only lower it, and a dimension with no ceiling here
 * is granted nothing beyond the execution's budget.
 */
export type NegotiationPolicy = Record<string, { ceiling: number }>;

export interface RuntimeOptions {
  store: Store;
  /** The outside ceilings of `ctx.negotiateBudget` (NegotiationPolicy). */
  negotiation?: NegotiationPolicy;
  /**
   * A call whose cost cannot be priced under a cost budget: `"refuse"` it (PriceUnknownError,
   * the default) or `"allow"` it unmetered. For the default middleware chain; a chain of your
   * own passes it to `budgetAdmission({ unpricedCost })`.
   */
  unpricedCost?: "refuse" | "allow";
  /**
   * Prices by model name, in USD per million tokens, for models the pinned price data does not
   * know (or prices you negotiated): `{ "my-model": { inputPerMTok: 0.5, outputPerMTok: 1.5 } }`.
   * A model priced here is admitted under a cost budget and metered with a cost. An LLM effect's
   * own `price` wins over this table, and this table over the price data. Checked when the
   * runtime is made (InvalidInputError naming the bad entry).
   */
  prices?: Record<string, ModelPrice>;
  clock?: Clock;
  ids?: IdSource;
  /** Defaults to `<host>/<pid namespace>/<pid>/<nonce>`. */
  ownerId?: string;
  leaseTtlMs?: number;
  /**
   * The fewest events between snapshots (default 1,000). A snapshot is also delayed until as many
   * bytes were appended since the last one as it had, so their cost stays constant per byte.
   */
  snapshotEvery?: number;
  /** How often the background loop fires due timers and recovers abandoned executions. */
  pollIntervalMs?: number;
  /**
   * How often a runtime running its background loop writes its fleet member row (members.ts
   * M1; default 10 000 ms of the runtime clock). `fleet()` leaves out a member silent for three
   * of these (M3).
   */
  heartbeatMs?: number;
  /**
   * Which abandoned executions this runtime recovers (default: every one whose flow it has).
   * `loom run` limits it to its own execution, so a short command does not adopt other work.
   */
  recoverWhere?: (executionId: string) => boolean;
  /**
   * The most executions recovery makes this runtime drive at once (default: no limit). Runs it
   * started itself count too; recovery leaves the rest to other workers.
   */
  maxActive?: number;
  /**
   * How often a runtime that drives executions checks whether another process cancelled one of
   * them (default 50 ms): the bound on a cross-process cancel's latency.
   */
  noticePollMs?: number;
  /**
   * Each queue's limits (runtime/queues.ts): `{ support: { concurrency: 5, keyConcurrency: 1 } }`
   * runs at most 5 executions of the queue "support" at once across every process sharing the
   * store, and one per key. Every process sharing the store must pass the same; a queue not
   * named here is unlimited. Checked when the runtime is made (InvalidInputError).
   */
  queues?: Record<string, QueueLimits>;
  /**
   * Rate limiters by name (runtime/rate-limits.ts), shared through the store by every process:
   * `{ "openai:gpt-4o": { rpm: 500, inputTpm: 30_000, outputTpm: 10_000, concurrent: 20 } }`.
   * An LLM effect reserves with `<provider>:<model>` (or its `limiter` option) before each call,
   * waits while the window is full, and settles with what it used; a provider's 429 makes the
   * whole fleet back off. Per minute unless `windowMs` says otherwise. Every process sharing the
   * store must pass the same.
   */
  rateLimits?: Record<string, RateLimitOptions>;
  /** Run the background loop (default true). Command-line reads turn it off. */
  background?: boolean;
  cache?: { maxExecutions?: number; maxBytes?: number };
  limits?: Partial<Limits>;
  /**
   * Middleware around every `ctx.execute(effect)`, outermost first. Default: retry, budget
   * admission, then metering (`defaultMiddleware()`); pass `[]` for none. A chain without
   * `retryMiddleware` makes one attempt, whatever a call's `retry` option says. A chain without
   * `budgetAdmission` or `meteringMiddleware` gets them innermost for calls with a budget in
   * force, so no chain can drop a budget (effects/middleware.ts G3).
   */
  middleware?: EffectMiddleware[];
  /** Close the store when the runtime closes (default true). */
  closeStore?: boolean;
  /**
   * Errors that no caller awaits: background work (a renewal, a timer) and executions this
   * runtime cannot drive (NonDeterminismError, FlowVersionError), each reported once.
   */
  onError?: (error: Error) => void;
  /**
   * Features a whole fleet must agree on. `continueAsNew` (default off) enables
   * `ctx.continueAsNew`: turn it on only once every process sharing the store folds
   * EXECUTION_CONTINUED (ADR 0109 D8).
   */
  features?: { continueAsNew?: boolean };
  /** The largest carry `ctx.continueAsNew` takes, in bytes of JSON text (default 1 MiB). */
  maxCarryBytes?: number;
  /** How many verified links routing steps beyond where it landed (default 8; ADR 0109). */
  maxChainHops?: number;
  /**
   * Seals every payload before the store writes it (events, snapshots, inbox messages, schedule
   * inputs), and opens it on read: `aesGcmCodec({ keys, currentKeyId })` or your own (docs/trust.md).
   * Every process sharing the store needs the same keys. Default: none (payloads in the clear).
   */
  codec?: PayloadCodec;
  /**
   * Stamps the audit chain on every event this runtime appends (`meta.prev`, `meta.hash`), which
   * `runtime.verifyLog` and `loom verify` check: `true` for SHA-256, `{ key }` for HMAC-SHA-256.
   * Default off (G2).
   */
  audit?: AuditSetting;
  /**
   * Where the spans of executions and steps go (docs/tracing.md). Default: the global one,
   * `trace.getTracerProvider()` of `@opentelemetry/api`: a no-op until an SDK registers one, and
   * a proxy, so an SDK registered after the runtime is made is still used. Nothing of tracing
   * reaches the log.
   */
  tracerProvider?: TracerProvider;
}

export interface StartOptions extends StartQueueOptions {
  /**
   * Debounce starts by key (runtime/debounce.ts): the starts of `key` within `ms` of each other
   * make one execution, admitted `ms` after the latest (at most `maxMs` after the first), which
   * runs with the last input. Needs a queue (the start's or the flow's); the handle is the one
   * execution's.
   */
  debounce?: DebounceOptions;
  /** A caller-chosen id: starting twice with the same flow and input is one execution. */
  id?: string;
  /** What this execution may spend (overrides the flow's budget); recorded in its start. */
  budget?: Budget;
  /** How long this execution may run (overrides the flow's `deadlineMs`); recorded in its start. */
  deadlineMs?: number;
  /**
   * Who owns the execution (ADR 0111): recorded in its start and inherited by its chain; resume,
   * send, cancel, fork and reads then need `{ as: principal }`.
   */
  principal?: string;
  /**
   * The data subject (a person or customer, by an opaque id) whose data the execution holds:
   * its payloads are sealed with the subject's own key, inherited by its successors, children and
   * forks, and `runtime.eraseSubject(subject)` makes them unrecoverable (docs/trust.md).
   */
  subject?: string;
  /**
   * Drive the execution in this process (default true). `false` only records its start, with its
   * lease free: a worker sharing the store (`loom worker`, a fleet member) claims it and drives
   * it, and the handle settles from the log. A start that finds the execution already there
   * attaches to it either way.
   */
  drive?: boolean;
}

/** Who is calling: the principal an owned execution needs (ADR 0111). */
export interface CallerOptions {
  as?: string;
}

export interface ForkOptions extends CallerOptions {
  /**
   * The fork's own budget (fork.ts V6): it may lower its origin's limits at the fork point, or
   * add a dimension the origin does not limit, never raise or leave one out. What the copied
   * prefix spent counts against it: `{ tokens: 1000 }` over a prefix that spent 800 leaves 200.
   */
  budget?: Budget;
  /**
   * Keep the origin's clock (fork.ts V7): the fork's deadline and the timeouts of the steps its
   * prefix left running count from the origin's start, as they were. By default they count from
   * the moment of the fork.
   */
  keepDeadline?: boolean;
}

export interface ExecutionHandle<O = unknown> {
  readonly id: string;
  /** Waits for the execution's outcome; settlement is by the terminal fact in the log. */
  result(): Promise<Outcome<O>>;
  /** Cancels the execution (see `Runtime.cancel`); false when it had already ended. */
  cancel(reason?: string): Promise<boolean>;
  /** Its LLM steps' text deltas as they stream, in this process (see `Runtime.deltas`). */
  deltas(): AsyncIterableIterator<LiveDelta>;
}
