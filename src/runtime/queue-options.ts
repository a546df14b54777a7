/**
 * The queue options of a runtime, a flow and a start, checked before anything is recorded
 * (queues.ts QU4), and the mark a start records (QU1).
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { QueueMark } from "../kernel/queue.ts";
import type { QueueLimits } from "../store/spi.ts";
import type { Flow, FlowQueue, FlowQueueChecked, StartQueueOptions } from "./contract.ts";

const NAME = /^[\w.:/@-]{1,200}$/u;
/** A UTF-16 surrogate with no pair (in `u` mode a pair is one code point, which this misses). */
const LONE_SURROGATE = /\p{Cs}/u;

/** debounce.ts DB5: the prefix of a debounced start's dedupe keys, which no start's own may take. */
export const DEBOUNCE_PREFIX = "debounce:";

/** QU4: the runtime's `queues` option, checked. */
export function checkedQueueLimits(
  value: Record<string, QueueLimits> | undefined,
): Readonly<Record<string, QueueLimits>> {
  if (value === undefined) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError("queues must be an object of queue name -> limits");
  }
  const out: Record<string, QueueLimits> = {};
  for (const [name, limits] of Object.entries(value)) {
    checkedName(name, "queue name");
    if (limits === null || typeof limits !== "object" || Array.isArray(limits)) {
      throw new InvalidInputError(`queue "${name}" limits must be an object`);
    }
    const unknown = Object.keys(limits).filter(
      (k) => k !== "concurrency" && k !== "keyConcurrency",
    );
    if (unknown.length > 0) {
      throw new InvalidInputError(
        `queue "${name}" has unknown limits ${unknown.map((k) => JSON.stringify(k)).join(", ")} (known: concurrency, keyConcurrency)`,
      );
    }
    const kept: QueueLimits = {};
    if (limits.concurrency !== undefined) {
      kept.concurrency = count(limits.concurrency, `queue "${name}" concurrency`);
    }
    if (limits.keyConcurrency !== undefined) {
      kept.keyConcurrency = count(limits.keyConcurrency, `queue "${name}" keyConcurrency`);
    }
    out[name] = Object.freeze(kept);
  }
  return Object.freeze(out);
}

/** QU4: a flow's `queue` option, checked (flow$). */
export function checkedFlowQueue(value: FlowQueue<never>, flow: string): FlowQueueChecked {
  if (typeof value === "string") return { name: checkedName(value, `flow "${flow}" queue`) };
  if (value === null || typeof value !== "object") {
    throw new InvalidInputError(`flow "${flow}" queue must be a name or { name, key?, priority? }`);
  }
  const out: FlowQueueChecked = { name: checkedName(value.name, `flow "${flow}" queue name`) };
  if (value.key !== undefined) {
    if (typeof value.key !== "function") {
      throw new InvalidInputError(`flow "${flow}" queue key must be a function of the input`);
    }
    out.key = value.key as (input: unknown) => string;
  }
  if (value.priority !== undefined) out.priority = priority(value.priority, `flow "${flow}"`);
  return out;
}

/**
 * QU1, QU4: the queue mark a start records, from its options over its flow's, or undefined when
 * it waits in no queue. `input` is the checked input (a flow's `key` reads it).
 */
export function queueMarkOf(
  flow: Flow,
  options: StartQueueOptions,
  input: unknown,
): QueueMark | undefined {
  const own = flow.queue;
  const name = options.queue === undefined ? own?.name : checkedName(options.queue, "start queue");
  if (name === undefined) {
    for (const k of ["key", "priority", "dedupe"] as const) {
      if (options[k] !== undefined) {
        throw new InvalidInputError(
          `start option ${k} needs a queue (start's queue option or the flow's)`,
        );
      }
    }
    return undefined;
  }
  const mark: QueueMark = {
    name,
    priority:
      options.priority === undefined
        ? (own?.priority ?? 0)
        : priority(options.priority, "start option"),
  };
  const key = options.key ?? (own?.key && name === own.name ? keyOf(own.key, input) : undefined);
  if (key !== undefined) mark.key = checkedKey(key, "queue key");
  if (options.dedupe !== undefined) {
    mark.dedupe = checkedKey(options.dedupe, "dedupe key");
    if (mark.dedupe.startsWith(DEBOUNCE_PREFIX)) {
      throw new InvalidInputError(
        `dedupe key ${JSON.stringify(mark.dedupe)}: keys beginning with "debounce:" are a debounced start's own`,
      );
    }
  }
  return mark;
}

/** QU4: a flow's `key(input)`, whose throw is the start's InvalidInputError. */
function keyOf(key: (input: unknown) => string, input: unknown): unknown {
  try {
    return key(input);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new InvalidInputError(`the flow's queue key(input) threw: ${why}`);
  }
}

function checkedName(value: unknown, what: string): string {
  if (typeof value !== "string" || !NAME.test(value)) {
    throw new InvalidInputError(
      `${what} must be 1 to 200 letters, digits or _ . : / @ -, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function checkedKey(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length === 0 || value.length > 500) {
    throw new InvalidInputError(`${what} must be a string of 1 to 500 characters`);
  }
  // QU4: the SQL stores keep UTF-8, where every lone surrogate is U+FFFD: two keys would be one.
  if (LONE_SURROGATE.test(value)) {
    throw new InvalidInputError(`${what} must be well-formed Unicode (it holds a lone surrogate)`);
  }
  return value;
}

function count(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError(`${what} must be a whole number >= 1, got ${String(value)}`);
  }
  return value;
}

function priority(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || Math.abs(value) > 2 ** 31) {
    throw new InvalidInputError(`${what} priority must be a whole number, got ${String(value)}`);
  }
  return value;
}
