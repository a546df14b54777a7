/**
 * SIM17, the queues' invariant (issue 26), on the logs and the simulated clock's event times.
 *
 * Terms. An execution is "of queue q" when its EXECUTION_STARTED carries q's mark. It "holds a
 * slot" from its EXECUTION_ADMITTED to its terminal event (or the end of the run); a chain's
 * successor, whose mark carries `admittedAt` (fold/queue.ts QF4), holds its predecessor's slot from
 * its own start, so a chain (all its generations) holds one slot: the union of its generations'
 * spans (the moment in which a predecessor and its successor both live is one slot, not two). A
 * fork whose copied prefix was admitted (its EXECUTION_ADMITTED, or its start's `admittedAt`, is a
 * copy) runs at once, by the operator's act (docs/flow-control.md), and is not counted: the queue
 * did not admit it (the store counts it, so it only makes the queue admit fewer).
 *
 * SIM17. For each queue with limits (concurrency C, keyConcurrency K):
 *        (a) at no instant do more than C chains of the queue hold a slot, nor more than K of one
 *            key;
 *        (b) an execution that waited in the queue has at most one EXECUTION_ADMITTED of its own
 *            (a crash between admission and its append admits it again, QU3, but appends one),
 *            and none before the time its last debounce (or its mark) says it is not admitted
 *            before (`notBeforeMs`);
 *        (c) no body ran before its admission: no event of the body (a step, a decision, a timer,
 *            a suspend, a consumed message, a child, a completion or continuation) precedes its
 *            EXECUTION_ADMITTED in its log, so one that ended without an admission was cancelled
 *            or failed (a deadline) while it waited; and no effect of it starts before its log
 *            has one (checked as the effect starts: `ranUnadmitted`).
 *        Both hold under crashes and a fleet's lease takeovers: admission takes the execution's
 *        lease in the transaction that counts the slots (S26).
 */
import { isPlainObject } from "../src/kernel/json.ts";
import { isTerminalEvent, type Envelope, type EventKind } from "../src/kernel/events.ts";
import { readQueueMark, type QueueMark } from "../src/kernel/queue.ts";
import { foldAll } from "../src/fold/fold.ts";
import type { QueueLimits } from "../src/store/spi.ts";

/** What a body appends; none of it may precede an admission (SIM17 c). */
const BODY: ReadonlySet<EventKind> = new Set<EventKind>([
  "STEP_STARTED",
  "STEP_COMPLETED",
  "STEP_FAILED",
  "STEP_NOTED",
  "DECISION_RECORDED",
  "TIMER_SCHEDULED",
  "TIMER_FIRED",
  "SUSPENDED",
  "MESSAGE_CONSUMED",
  "RESOURCE_METERED",
  "QUOTA_EXCEEDED",
  "CHILD_STARTED",
  "CHILD_DONE",
  "EXECUTION_COMPLETED",
  "EXECUTION_CONTINUED",
]);

const copied = (e: Envelope) => isPlainObject(e.meta) && e.meta.forkedFrom !== undefined;
const admission = (e: Envelope) => e.kind === "EXECUTION_ADMITTED" && e.meta?.kernel === true;

/** The queue mark a log's start records, and whether it was admitted already (QF4). */
function markOf(log: readonly Envelope[]): (QueueMark & { admitted: boolean }) | undefined {
  const p = log[0]?.payload;
  const mark = isPlainObject(p) ? readQueueMark(p.queue) : undefined;
  if (!mark || !isPlainObject(p) || !isPlainObject(p.queue)) return undefined;
  return { ...mark, admitted: typeof p.queue.admittedAt === "number" };
}

/** SIM17 (c), as an effect starts: its execution waits in a queue and its log has no admission. */
export function ranUnadmitted(log: readonly Envelope[]): boolean {
  const mark = markOf(log);
  return mark !== undefined && !mark.admitted && !log.some(admission);
}

/** One chain's slot in a queue: its spans, merged. */
interface Slot {
  queue: string;
  key?: string;
  spans: [number, number][];
}

/** SIM17 over every log of the run (every generation, fork and child). */
export function checkQueues(
  logs: ReadonlyMap<string, readonly Envelope[]>,
  limits: Readonly<Record<string, QueueLimits>>,
  endMs: number,
  out: string[],
): void {
  const slots = new Map<string, Slot>();
  const operators = new Set<string>();
  for (const [id, log] of logs) {
    const mark = markOf(log);
    const start = log[0];
    if (!mark || !start) continue;
    const chain = foldAll([start])._chain?.chainId ?? id;
    const last = log[log.length - 1];
    const until = last && isTerminalEvent(last) ? last.at : endMs;
    let from: number | undefined;
    if (mark.admitted) {
      if (copied(start)) operators.add(chain);
      from = start.at;
    } else {
      const first = log.find(admission);
      if (first && copied(first)) operators.add(chain);
      checkWaited(id, log, mark, out);
      from = first?.at;
    }
    if (from === undefined) continue;
    const slot = slots.get(chain) ?? { queue: mark.name, spans: [] };
    if (mark.key !== undefined) slot.key ??= mark.key;
    slot.spans.push([from, until]);
    slots.set(chain, slot);
  }
  for (const chain of operators) slots.delete(chain);
  for (const [queue, limit] of Object.entries(limits)) {
    const held = [...slots.entries()].filter(([, s]) => s.queue === queue);
    checkHeld(queue, held, limit.concurrency, out);
    for (const key of new Set(held.map(([, s]) => s.key))) {
      if (key === undefined) continue;
      const ofKey = held.filter(([, s]) => s.key === key);
      checkHeld(`${queue} key ${key}`, ofKey, limit.keyConcurrency, out);
    }
  }
}

/** SIM17 (b), (c) on the log of an execution that waited in its queue. */
function checkWaited(id: string, log: readonly Envelope[], mark: QueueMark, out: string[]) {
  const own = log.filter((e) => admission(e) && !copied(e));
  if (own.length > 1) {
    out.push(`SIM17 ${id}: admitted ${own.length} times (at ${own.map((e) => e.seq).join(", ")})`);
  }
  let notBefore = mark.notBeforeMs;
  for (const e of log) {
    if (admission(e)) {
      if (notBefore !== undefined && e.at < notBefore) {
        out.push(`SIM17 ${id}: admitted at ${e.at}, before its notBeforeMs ${notBefore}`);
      }
      return;
    }
    if (BODY.has(e.kind)) {
      out.push(`SIM17 ${id}: ${e.kind} at ${e.seq} before its admission`);
      return;
    }
    const p = e.payload;
    if (e.kind === "START_DEBOUNCED" && isPlainObject(p) && typeof p.notBeforeMs === "number") {
      notBefore = p.notBeforeMs;
    }
  }
}

/** SIM17 (a): the slots `held` never number more than `max` at once. */
function checkHeld(what: string, held: [string, Slot][], max: number | undefined, out: string[]) {
  if (max === undefined) return;
  const edges: { t: number; d: number; chain: string }[] = [];
  for (const [chain, slot] of held) {
    for (const [from, until] of merged(slot.spans)) {
      edges.push({ t: from, d: 1, chain }, { t: until, d: -1, chain });
    }
  }
  // At one instant, ends before starts: a slot is [admission, end).
  edges.sort((x, y) => x.t - y.t || x.d - y.d);
  const open = new Set<string>();
  for (const e of edges) {
    if (e.d < 0) {
      open.delete(e.chain);
      continue;
    }
    open.add(e.chain);
    if (open.size > max) {
      out.push(
        `SIM17 queue ${what}: ${open.size} hold a slot at ${e.t}, limit ${max} (${[...open].join(", ")})`,
      );
      return;
    }
  }
}

/** Spans that overlap or touch, as one. */
function merged(spans: [number, number][]): [number, number][] {
  const sorted = [...spans].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [from, until] of sorted) {
    const last = out[out.length - 1];
    if (last && from <= last[1]) last[1] = Math.max(last[1], until);
    else out.push([from, until]);
  }
  return out;
}
