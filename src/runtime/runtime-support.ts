/** Small pieces the runtime uses: option checks, the idempotent-start comparison, a deadline race. */
import {
  ExecutionConflictError,
  InvalidInputError,
  ReservedSuccessorIdError,
  WaitTimeoutError,
} from "../kernel/errors.ts";
import { canonicalJson, type Json } from "../kernel/json.ts";
import { successorShape } from "../kernel/chain.ts";
import { reservedShape } from "../kernel/ids.ts";
import { EVENT_SCHEMA_VERSION } from "../kernel/events.ts";
import type { Budget } from "../kernel/resources.ts";
import type { Flow } from "./flow.ts";

/** W5: the same id starts the same execution only with the same flow and input. */
export function assertSameStart(
  id: string,
  flow: string,
  input: Json | undefined,
  recordedFlow: string,
  recordedInput: Json | undefined,
): void {
  if (recordedFlow === flow && canonicalJson(recordedInput) === canonicalJson(input)) return;
  const what =
    recordedFlow !== flow ? `flow "${recordedFlow}", not "${flow}"` : "a different input";
  throw new ExecutionConflictError(
    `execution "${id}" already exists with ${what}; the same id starts the same execution only with the same flow and input`,
    { executionId: id, recordedFlow, flow },
  );
}

/**
 * ADR 0109 D2 (a), kernel/ids.ts I1..I3: an id a caller creates may not have a shape the kernel
 * makes. A chain's successor shape: its last segment never (`foo~1`, `a::b~1`, `edge::~1`); its
 * root segment only for the kernel's own orchestration, which starts a generation's children
 * through its own path, not here (`foo~1::x`). A child's (`p::key#0`) or a schedule
 * occurrence's (`name@<ISO instant>`) never: only the supervisor and the schedule's firing make
 * those, through their own paths (`kernelMade` names the one a kernel path may create).
 */
export function assertCreatable(id: string, kernelMade?: "occurrence"): void {
  const shape = successorShape(id);
  if (shape !== undefined) {
    throw new ReservedSuccessorIdError(
      shape === "last"
        ? `execution id ${JSON.stringify(id)} has the shape of a chain's next generation (<id>~<n>), which only ctx.continueAsNew creates`
        : `execution id ${JSON.stringify(id)} names a child of a chain generation, which only Loom's orchestration creates`,
      { executionId: id },
    );
  }
  const reserved = reservedShape(id);
  if (reserved === undefined || reserved === kernelMade) return;
  throw new InvalidInputError(
    reserved === "child"
      ? `execution id ${JSON.stringify(id)} has the shape of a child's id (<parent>::<key>#<n>), which only ctx.spawn creates`
      : `execution id ${JSON.stringify(id)} has the shape of a schedule occurrence's id (<name>@<ISO time>), which only the schedule creates`,
    { executionId: id },
  );
}

/** What a start records in sequence 0 besides the chain (see continuation.ts for successors). */
export function startPayload(
  flow: Flow,
  input: Json | undefined,
  limits: { budget: Budget | undefined; deadlineMs: number | undefined },
): { [k: string]: Json } {
  const payload: { [k: string]: Json } = {
    flow: flow.name,
    flowVersion: flow.version,
    fingerprint: flow.fingerprint,
    schemaVersion: EVENT_SCHEMA_VERSION,
  };
  if (input !== undefined) payload.input = input;
  if (limits.budget !== undefined) payload.budget = limits.budget as unknown as Json;
  if (limits.deadlineMs !== undefined) payload.deadlineMs = limits.deadlineMs;
  return payload;
}

/** A principal: 1..200 characters (ADR 0111), or none. */
export function checkedPrincipal(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value === "" || value.length > 200) {
    throw new InvalidInputError("principal must be a string of 1 to 200 characters");
  }
  return value;
}

/** A data subject: an opaque id of 1..200 characters, or none (docs/trust.md). */
export function checkedSubject(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value === "" || value.length > 200) {
    throw new InvalidInputError("subject must be a string of 1 to 200 characters");
  }
  return value;
}

export function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidInputError(`${name} must be a finite number > 0, got ${String(value)}`);
  }
  return value;
}

/** `p`, or WaitTimeoutError after `ms` real milliseconds. */
export async function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  if (ms === Infinity) return p;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new WaitTimeoutError(`wait ended after ${ms} ms`)),
      Math.max(0, ms),
    );
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The runtime's own work: a per-execution queue (W3: outside operations on one execution run one
 * at a time) and the background promises that `close()` waits for.
 */
export class Tasks {
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly pending = new Set<Promise<unknown>>();

  constructor(private readonly report: (e: unknown) => void) {}

  exclusive<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(id) ?? Promise.resolve();
    const next = previous.then(() => fn());
    const settled = next.catch(() => undefined);
    this.locks.set(id, settled);
    this.background(settled);
    void settled.then(() => {
      if (this.locks.get(id) === settled) this.locks.delete(id);
    });
    return next;
  }

  background(p: Promise<unknown>): void {
    const tracked = p
      .catch((e: unknown) => this.report(e))
      .finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}
