/**
 * Flows and steps: what a user defines.
 *
 * A flow's `fingerprint` is a hash of its body's source text. `EXECUTION_STARTED` records the
 * flow's name, declared version and fingerprint; see docs/decisions/0003-flow-versions.md for what
 * recovery does when they change.
 */
import { createHash } from "node:crypto";
import { InvalidInputError } from "../kernel/errors.ts";
import {
  readBudget,
  type Budget,
  type ResourceDelta,
  type ResourceSnapshot,
} from "../kernel/resources.ts";
import type { FlowContext } from "./context.ts";
import type { ExecuteOptions } from "../effects/middleware.ts";
import { checkedRetryPolicy } from "../effects/retry.ts";
import { checkedDuration } from "./deadline.ts";
import { checkedTaintSource } from "../kernel/taint.ts";

export interface EffectContext {
  executionId: string;
  /** The step's deterministic call id within the execution. */
  stepId: string;
  /** 1 on the first attempt; higher when the step is re-run after a crash. */
  attempt: number;
  /** Stable across retries and recovery: pass it to the outside world to deduplicate. */
  idempotencyKey: string;
  /** Aborted when the runtime closes or loses the execution; forward it to what you call. */
  signal: AbortSignal;
  /** What the execution had spent when this attempt started. */
  resources: ResourceSnapshot;
  /** Reports what this attempt cost (tokens, cost, ...); metering writes it after the effect. */
  meter(delta: ResourceDelta): void;
  /**
   * Tells the runtime what this attempt has cost so far, for when it is cut short before it can
   * meter (a cancel, a step timeout): the runtime then meters `soFar()`, marked as an estimate.
   * A streaming LLM call registers its running estimate here.
   */
  provisional?(soFar: () => ResourceDelta | undefined): void;
  /**
   * Adds attributes to this step's trace span (OpenTelemetry names: `gen_ai.*` for an LLM call),
   * present only while that span records (docs/tracing.md). Call it as
   * `ectx.annotate?.({ ... })`: when it is absent the call short-circuits and the attributes are
   * not even built.
   */
  readonly annotate?: (attributes: StepAttributes) => void;
}

/** Span attributes an effect reports (OpenTelemetry's attribute values; undefined is skipped). */
export type StepAttributes = Record<string, string | number | boolean | string[] | undefined>;

export interface Effect<I, O> {
  readonly name: string;
  run(input: I, ectx: EffectContext): Promise<O> | O;
  /**
   * Refuses a malformed input before anything is recorded (throw InvalidInputError). Pure: it
   * runs on every call, replays included.
   */
  checkInput?(input: I): void;
  /** Options for every call of this effect (a retry policy, say); a call's own override them. */
  readonly options?: ExecuteOptions;
  /**
   * Marks every output of this effect as tainted from this source (a web fetch, a tool): the
   * step's recorded output is the wrapper `{ $tainted, value }` (kernel/taint.ts). A call's own
   * `taint` option names another source instead.
   */
  readonly taintsOutput?: string;
  /**
   * Refuses an input that holds a tainted value anywhere in it with TaintedInputError, before
   * anything is recorded (a shell, a payment): `untaint` what a person or a check has cleared.
   */
  readonly refusesTainted?: boolean;
}

/** An effect whose output is always tainted: `ctx.execute` of it resolves to a `Tainted<O>`. */
export type TaintingEffect<I, O> = Effect<I, O> & { readonly taintsOutput: string };

/** What `step$` takes: the call options every call gets, and the effect's taint declarations. */
export interface StepDefinitionOptions extends Omit<ExecuteOptions, "taint"> {
  /** As `Effect.taintsOutput`: the step's output is tainted from this source. */
  taintsOutput?: string;
  /** As `Effect.refusesTainted`: a tainted input is refused with TaintedInputError. */
  refusesTainted?: boolean;
}

export interface FlowOptions {
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
}

export interface Flow<I = unknown, O = unknown> {
  readonly kind: "loom.flow";
  readonly name: string;
  readonly version: string;
  readonly compatibleVersions: readonly string[];
  readonly fingerprint: string;
  readonly budget?: Budget;
  readonly deadlineMs?: number;
  /** A method, so that a Flow<I, O> is usable wherever a Flow<unknown, unknown> is. */
  body(this: void, ctx: FlowContext, input: I): Promise<O>;
}

const MAX_NAME_LENGTH = 100;

/** Flow names and step names: 1..100 characters, no `/` or `#` (they build call ids). */
export function assertName(name: unknown, what: string): asserts name is string {
  if (typeof name !== "string" || name.length === 0 || name.length > MAX_NAME_LENGTH) {
    throw new InvalidInputError(`${what} must be a string of 1 to ${MAX_NAME_LENGTH} characters`);
  }
  if (name.includes("/") || name.includes("#")) {
    throw new InvalidInputError(`${what} ${JSON.stringify(name)} may not contain "/" or "#"`);
  }
}

/**
 * Defines a flow.
 *
 * @example
 * const greet = flow$("greet", async (ctx, input: { name: string }) => {
 *   const text = await ctx.run("compose", async () => `hello ${input.name}`);
 *   return { text };
 * });
 */
export function flow$<I, O>(
  name: string,
  body: (ctx: FlowContext, input: I) => Promise<O>,
  options: FlowOptions = {},
): Flow<I, O> {
  assertName(name, "flow name");
  if (typeof body !== "function") throw new InvalidInputError(`flow "${name}" needs a function`);
  const version = options.version ?? "1";
  if (typeof version !== "string" || version.length === 0) {
    throw new InvalidInputError(`flow "${name}" version must be a non-empty string`);
  }
  const compatibleVersions = [...(options.compatibleVersions ?? [])];
  if (!compatibleVersions.every((v) => typeof v === "string")) {
    throw new InvalidInputError(`flow "${name}" compatibleVersions must be strings`);
  }
  const fingerprint = createHash("sha256").update(body.toString()).digest("hex").slice(0, 16);
  const flow: Flow<I, O> = {
    kind: "loom.flow",
    name,
    version,
    compatibleVersions,
    fingerprint,
    body,
  };
  let out = flow;
  if (options.budget !== undefined) {
    out = { ...out, budget: checkedBudget(options.budget, `flow "${name}"`) };
  }
  if (options.deadlineMs !== undefined) {
    out = { ...out, deadlineMs: checkedDuration(options.deadlineMs, `flow "${name}" deadlineMs`) };
  }
  return out;
}

/** A budget checked before anything is recorded: every limit a finite number >= 0. */
export function checkedBudget(value: unknown, owner: string): Budget {
  const budget = readBudget(value);
  if (!budget) {
    throw new InvalidInputError(
      `the budget of ${owner} must be an object of finite numbers >= 0 (tokens, costUsd, ms, memBytes, wallMs, netBytes, custom)`,
    );
  }
  return budget;
}

export function isFlow(value: unknown): value is Flow {
  return (
    value !== null &&
    typeof value === "object" &&
    (value as { kind?: unknown }).kind === "loom.flow"
  );
}

/**
 * Defines a reusable step, run with `ctx.execute(step, input)`; its input is recorded.
 *
 * @example
 * const search = step$("search", async (q: string, { signal }) => fetchResults(q, signal));
 * const hits = await ctx.execute(search, "tides");
 */
export function step$<I, O>(
  name: string,
  run: (input: I, ectx: EffectContext) => Promise<O> | O,
  options: StepDefinitionOptions & { taintsOutput: string },
): TaintingEffect<I, O>;
export function step$<I, O>(
  name: string,
  run: (input: I, ectx: EffectContext) => Promise<O> | O,
  options?: StepDefinitionOptions,
): Effect<I, O>;
export function step$<I, O>(
  name: string,
  run: (input: I, ectx: EffectContext) => Promise<O> | O,
  options?: StepDefinitionOptions,
): Effect<I, O> {
  assertName(name, "step name");
  if (typeof run !== "function") throw new InvalidInputError(`step "${name}" needs a function`);
  if (options === undefined) return { name, run };
  const { taintsOutput, refusesTainted, ...callOptions } = checkedOptions(
    options,
    `step "${name}"`,
    ["retry", "timeoutMs", "atMostOnce", "taintsOutput", "refusesTainted"],
  );
  return {
    name,
    run,
    options: callOptions,
    ...(taintsOutput === undefined ? {} : { taintsOutput }),
    ...(refusesTainted === undefined ? {} : { refusesTainted }),
  };
}

type OptionKey = "retry" | "timeoutMs" | "atMostOnce" | "taint" | "taintsOutput" | "refusesTainted";

/** What `checkedOptions` gives: call options, and an effect's taint declarations. */
export interface CheckedOptions extends ExecuteOptions {
  taintsOutput?: string;
  refusesTainted?: boolean;
}

/** Per-call options of `ctx.execute`, checked before anything is recorded. */
export function checkedExecuteOptions(value: unknown, owner: string): ExecuteOptions {
  return checkedOptions(value, owner, ["retry", "timeoutMs", "atMostOnce", "taint"]);
}

/** Options of a step call, of the `known` kinds only; a refusal names the owner and the key. */
export function checkedOptions(
  value: unknown,
  owner: string,
  known: readonly OptionKey[],
): CheckedOptions {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError(`the options of ${owner} must be an object`);
  }
  const given = value as Record<string, unknown>;
  const unknown = Object.keys(given).filter((k) => !(known as readonly string[]).includes(k));
  if (unknown.length > 0) {
    throw new InvalidInputError(
      `the options of ${owner} have unknown keys: ${unknown.join(", ")} (known: ${known.join(", ")})`,
    );
  }
  const { retry, timeoutMs, atMostOnce, taint, taintsOutput, refusesTainted } = given;
  const out: CheckedOptions = {};
  if (retry !== undefined) out.retry = checkedRetryPolicy(retry, owner);
  if (timeoutMs !== undefined) out.timeoutMs = checkedDuration(timeoutMs, `${owner} timeoutMs`);
  if (atMostOnce !== undefined) {
    if (typeof atMostOnce !== "boolean") {
      throw new InvalidInputError(`${owner} atMostOnce must be true or false`);
    }
    out.atMostOnce = atMostOnce;
  }
  if (taint !== undefined) out.taint = checkedTaintSource(taint, `${owner} taint`);
  if (taintsOutput !== undefined) {
    out.taintsOutput = checkedTaintSource(taintsOutput, `${owner} taintsOutput`);
  }
  if (refusesTainted !== undefined)
    out.refusesTainted = checkedRefusesTainted(refusesTainted, owner);
  return out;
}

/** An effect's `refusesTainted`, which must be a boolean: a guard that is not one is refused. */
export function checkedRefusesTainted(value: unknown, owner: string): boolean {
  if (typeof value !== "boolean") {
    throw new InvalidInputError(`${owner} refusesTainted must be true or false`);
  }
  return value;
}
