/**
 * Flows and steps: what a user defines.
 *
 * A flow's `fingerprint` is a hash of its body's source text. `EXECUTION_STARTED` records the
 * flow's name, declared version and fingerprint; see docs/decisions/0003-flow-versions.md for what
 * recovery does when they change.
 */
import { createHash } from "node:crypto";
import { InvalidInputError } from "../kernel/errors.ts";
import { readBudget, SCALAR_DIMENSIONS, type Budget } from "../kernel/resources.ts";
import type { Flow, FlowContext, FlowOptions } from "./contract.ts";
import { checkedFlowQueue } from "./queue-options.ts";

export type { Flow, FlowOptions } from "./contract.ts";
import type { Effect, EffectContext, ExecuteOptions, TaintingEffect } from "../effects/effect.ts";
import { checkedRetryPolicy } from "../effects/retry.ts";
import { checkedDuration } from "../kernel/limits.ts";
import { checkedTaintSource } from "../kernel/taint.ts";
import { checkedSchema } from "../kernel/schema.ts";

/** What `step$` takes: the call options every call gets, and the effect's taint declarations. */
export interface StepDefinitionOptions extends Omit<ExecuteOptions, "taint"> {
  /** As `Effect.taintsOutput`: the step's output is tainted from this source. */
  taintsOutput?: string;
  /** As `Effect.refusesTainted`: a tainted input is refused with TaintedInputError. */
  refusesTainted?: boolean;
}

export type { Effect, EffectContext, StepAttributes, TaintingEffect } from "../effects/effect.ts";

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
 * Defines a flow. Its input and output types flow from the body (or from `options.input`'s
 * schema) into `runtime.start(flow, input)` and `handle.result()`.
 *
 * @example
 * const greet = flow$("greet", async (ctx, input: { name: string }) => {
 *   const text = await ctx.run("compose", async () => `hello ${input.name}`);
 *   return { text };
 * });
 * // With a schema (zod here), the input is also checked at run time:
 * const triage = flow$("triage", async (ctx, input) => input.ticket, {
 *   input: z.object({ ticket: z.string() }),
 * });
 */
export function flow$<I, O, In = I>(
  name: string,
  body: (ctx: FlowContext, input: I) => Promise<O>,
  options: FlowOptions<I, O, In> = {},
): Flow<I, O, In> {
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
  const flow: Flow<I, O, In> = {
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
  if (options.queue !== undefined) {
    out = { ...out, queue: checkedFlowQueue(options.queue, name) };
  }
  if (options.input !== undefined) {
    out = { ...out, input: checkedSchema(options.input, `flow "${name}" input`) };
  }
  if (options.output !== undefined) {
    out = { ...out, output: checkedSchema(options.output, `flow "${name}" output`) };
  }
  // Not enumerable, so a copy made by spreading is not a flow: only what flow$ made is.
  Object.defineProperty(out, MADE_BY_FLOW, { value: true });
  return out;
}

/**
 * What flow$ marks its flows with (issue 21): registerFlow and start take only those, not an
 * object that merely says `kind: "loom.flow"`. A global symbol, so a flow made by another copy of
 * loomwork in the same process (a CLI's and a project's) is one too.
 */
const MADE_BY_FLOW = Symbol.for("loomwork.flow$");

/** The keys a budget may have: its dimensions, and `custom` for dimensions of the user's own. */
const BUDGET_KEYS = ["tokens", ...SCALAR_DIMENSIONS, "custom"] as const;

/**
 * A budget checked before anything is recorded: an object of the known dimensions only (a
 * misspelled one, such as `token`, would otherwise limit nothing), each limit a finite number
 * >= 0 (issue 20).
 */
export function checkedBudget(value: unknown, owner: string): Budget {
  const valid = `(valid dimensions: ${BUDGET_KEYS.join(", ")})`;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError(`the budget of ${owner} must be an object ${valid}`);
  }
  const unknown = Object.keys(value).filter((k) => !(BUDGET_KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) {
    throw new InvalidInputError(
      `the budget of ${owner} has unknown ${unknown.length === 1 ? "dimension" : "dimensions"} ${unknown.map((k) => JSON.stringify(k)).join(", ")} ${valid}`,
    );
  }
  const budget = readBudget(value);
  if (!budget) {
    throw new InvalidInputError(
      `the budget of ${owner} must hold finite numbers >= 0 (custom: an object of them) ${valid}`,
    );
  }
  return budget;
}

export function isFlow(value: unknown): value is Flow {
  return (
    value !== null &&
    typeof value === "object" &&
    (value as { kind?: unknown }).kind === "loom.flow" &&
    (value as { [MADE_BY_FLOW]?: unknown })[MADE_BY_FLOW] === true
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

type OptionKey =
  "retry" | "timeoutMs" | "atMostOnce" | "taint" | "taintsOutput" | "refusesTainted" | "limiter";

/** What `checkedOptions` gives: call options, and an effect's taint declarations. */
export interface CheckedOptions extends ExecuteOptions {
  taintsOutput?: string;
  refusesTainted?: boolean;
}

/** Per-call options of `ctx.execute`, checked before anything is recorded. */
export function checkedExecuteOptions(value: unknown, owner: string): ExecuteOptions {
  return checkedOptions(value, owner, ["retry", "timeoutMs", "atMostOnce", "taint", "limiter"]);
}

/** Options of a step call, of the `known` kinds only; a refusal names the owner and the key. */
/**
 * A verb's options, checked before anything is read or written (issue 21): absent is none, and
 * anything but a plain object (`null`, a string, an array) is InvalidInputError.
 */
export function optionsOf<T extends object>(value: T | undefined, verb: string): T {
  if (value === undefined) return {} as T;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError(
      `the options of ${verb} must be an object, got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`,
    );
  }
  return value;
}

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
  const { retry, timeoutMs, atMostOnce, taint, taintsOutput, refusesTainted, limiter } = given;
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
  if (limiter !== undefined) {
    if (limiter !== false && (typeof limiter !== "string" || limiter.length === 0)) {
      throw new InvalidInputError(`${owner} limiter must be a limiter's name or false`);
    }
    out.limiter = limiter;
  }
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
