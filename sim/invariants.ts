/**
 * What the simulator checks after every simulated event. Each invariant is cited by number.
 *
 * SIM1. Every log is well formed: dense sequence numbers from 0, EXECUTION_STARTED at 0, and
 *       nothing after a terminal event.
 * SIM2. A completed step is recorded once, and a step's effect starts again only if its
 *       completion was never recorded (checked when the effect starts).
 * SIM3. The fold of each log equals the state the store loads (snapshot plus tail) and the state
 *       a live runtime holds in memory for it.
 * SIM4. No budget is passed in the world by more than one reservation (issue 20): what the
 *       attempts of a budget's tree really spent, each counted as it begins (whether it is then
 *       recorded, crashed, cancelled, aborted or retried), is at most the budget plus
 *       MAX_STEP_TOKENS. A tree is a chain, all its generations, with its descendants' chains; an
 *       operator's budget, a child's grant and a child's own budget each head one. A fork starts
 *       from the spend it carried at its fork point. And an execution records as measured no more
 *       than its attempts spent. Checked once everything has ended: spend.ts (B1..B4).
 * SIM5. A cancelled execution has no live work: CANCEL_GRACE_MS after its EXECUTION_CANCELLED,
 *       none of its effects is running or starts.
 * SIM6. A timer fires at or after its wake time, and never twice.
 * SIM7. Every execution ends once the world stops failing, answers its suspends, sends the
 *       messages its conversation needs and lets time pass (liveness); for a chain, every
 *       generation, so its newest ends too.
 * SIM8. At most one live generation per chain (ADR 0109 D2). Generations are dense and each
 *       n >= 1 is started as generation n of the chain, continued from n - 1; a generation
 *       commits EXECUTION_CONTINUED, naming n + 1, only once n + 1 exists (successor first), so
 *       only the newest generation can be live without a successor. The one other generation
 *       that may be non-terminal is a predecessor in its start-to-commit window, and it is
 *       frozen: once its successor has started it appends nothing but its terminal event
 *       (continued, or cancelled), so a single generation does the chain's work at any time.
 *       At the end, a generation after a cancelled one is cancelled too: a cancelled chain has
 *       no live generation.
 * SIM9. Each sent message is consumed once. Across a chain's generations, the consumptions
 *       the fold accepts take each topic's messages in stream order, every one exactly once
 *       (none taken twice, none skipped); each records the message's key and payload; a key is
 *       delivered to the flow once, and a later message with that key is only recorded as a
 *       duplicate; a successor takes the inbox (cursors, dedupe window) where its predecessor
 *       left it. At the end, a conversation that completed received exactly the messages its
 *       generations consumed, and, with no receive timeout, one message per turn: every key it
 *       was sent.
 * SIM10. A store's failure is never an execution's outcome: no step or execution is recorded
 *       as failed with the error of a crash, a transient failure or a lost reply (the runtime
 *       stops and recovers instead; the flow never sees them).
 * SIM11. A fork (fork.ts V1..V4, ADR 0109 D7) is its origin's prefix, event for event: the same
 *       sequence numbers, kinds, times and payloads up to the fork point, each copied envelope
 *       carrying `meta.forkedFrom { executionId: origin, seq: forkPoint }` (and, for a fork of a
 *       chain member, `meta.forkChain { chainId: fork, generation: 0 }`), and nothing after the
 *       fork point carrying either. A fork is a chain of its own (SIM8: its generation 0 is the
 *       fork's id, with no `continuedFrom`; SIM9: it consumes only its own stream, and a copied
 *       consumption never moves its inbox). A fork is refused only at or after a terminal event
 *       of the origin's log.
 * SIM12..SIM15 are the children's: child-invariants.ts.
 */
import { canonicalJson, isPlainObject, type Json } from "../src/kernel/json.ts";
import { isTerminalEvent, type Envelope } from "../src/kernel/events.ts";
import { successorIdOf } from "../src/kernel/chain.ts";
import { fold, foldAll } from "../src/fold/fold.ts";
import { initialState, type ExecutionState } from "../src/fold/state.ts";
import { cursorOf } from "../src/runtime/inbox.ts";
import type { InboxMessage } from "../src/store/spi.ts";
import type { Conversation, ConversationEnd, Spec } from "./workload.ts";

export const CANCEL_GRACE_MS = 200;

/** The errors of the simulated store's faults (sim/faulty-store.ts). */
export const STORE_FAILURE = /simulated (crash|transient failure|lost reply)|the process is dead/;

export function checkLog(id: string, log: readonly Envelope[], out: string[]): void {
  let ended = false;
  log.forEach((e, i) => {
    if (e.seq !== i) out.push(`SIM1 ${id}: sequence ${e.seq} at position ${i}`);
    if (i === 0 && e.kind !== "EXECUTION_STARTED") out.push(`SIM1 ${id}: sequence 0 is ${e.kind}`);
    if (ended) out.push(`SIM1 ${id}: ${e.kind} at ${e.seq} after a terminal event`);
    if (isTerminalEvent(e)) ended = true;
  });
  for (const e of log) {
    if (e.kind !== "EXECUTION_FAILED" && e.kind !== "STEP_FAILED") continue;
    const message = (e.payload as { error?: { message?: unknown } }).error?.message;
    if (typeof message === "string" && STORE_FAILURE.test(message)) {
      out.push(`SIM10 ${id}: ${e.kind} at ${e.seq} records a store's failure: ${message}`);
    }
  }
  const completed = new Set<string>();
  const fired = new Set<string>();
  const wakeAt = new Map<string, number>();
  for (const e of log) {
    const p = e.payload as { callId?: unknown; wakeAtMs?: unknown };
    const callId = typeof p.callId === "string" ? p.callId : "";
    if (e.kind === "STEP_COMPLETED") {
      if (completed.has(callId)) out.push(`SIM2 ${id}: step ${callId} completed twice`);
      completed.add(callId);
    }
    if (
      (e.kind === "TIMER_SCHEDULED" || e.kind === "SUSPENDED") &&
      typeof p.wakeAtMs === "number"
    ) {
      wakeAt.set(callId, p.wakeAtMs);
    }
    if (e.kind === "TIMER_FIRED") {
      if (fired.has(callId)) out.push(`SIM6 ${id}: timer ${callId} fired twice`);
      fired.add(callId);
      const wake = wakeAt.get(callId);
      if (wake === undefined || e.at < wake) {
        out.push(`SIM6 ${id}: timer ${callId} fired at ${e.at}, before its wake time ${wake}`);
      }
    }
  }
}

/**
 * SIM3. `folded` is the canonical JSON of the fold of `log`, when the caller has it from an
 * earlier check of the same log (a log only grows: the same length, the same events).
 */
export function checkFold(
  id: string,
  log: readonly Envelope[],
  loaded: ExecutionState | undefined,
  held: ExecutionState | undefined,
  out: string[],
  folded?: string,
): void {
  const whole = folded ?? canonicalJson(foldAll(log));
  if (loaded && canonicalJson(loaded) !== whole)
    out.push(`SIM3 ${id}: snapshot plus tail differs from the fold`);
  if (held && held.seq === log.length - 1 && canonicalJson(held) !== whole) {
    out.push(`SIM3 ${id}: the live state differs from the fold of the log`);
  }
  if (held && held.seq > log.length - 1) {
    out.push(`SIM3 ${id}: the live state is at ${held.seq}, the log ends at ${log.length - 1}`);
  }
}

/** The time of the execution's EXECUTION_CANCELLED, if it has one. */
export function cancelledAt(log: readonly Envelope[]): number | undefined {
  const last = log[log.length - 1];
  return last && last.kind === "EXECUTION_CANCELLED" && isTerminalEvent(last) ? last.at : undefined;
}

/** One chain as one consistent read of the store shows it. */
export interface ChainView {
  chainId: string;
  /** The logs of generations 0, 1, ... up to the first that has none. */
  logs: readonly (readonly Envelope[])[];
  /** A generation past the first missing one that has a log (a gap), if the read found one. */
  beyond?: number;
  /** The chain's inbox stream, every topic, in stream order. */
  messages: readonly InboxMessage[];
}

/** The id of generation `n` of `chainId`. */
export function generationId(chainId: string, n: number): string {
  return n === 0 ? chainId : successorIdOf(chainId, n);
}

/**
 * SIM8's memory between reads: for each generation whose successor a read has seen, the length
 * of its log in the first such read. It was at most that long when the successor started.
 */
export function markSuccessors(view: ChainView, frozenAt: Map<number, number>): void {
  for (let n = 0; n + 1 < view.logs.length; n++) {
    if (!frozenAt.has(n)) frozenAt.set(n, view.logs[n]?.length ?? 0);
  }
}

/** SIM8 and SIM9 (their safety parts), on one consistent read of a chain. */
export function checkChain(
  view: ChainView,
  frozenAt: ReadonlyMap<number, number>,
  out: string[],
): void {
  checkGenerations(view, frozenAt, out);
  consumption(view, out);
}

function checkGenerations(
  view: ChainView,
  frozenAt: ReadonlyMap<number, number>,
  out: string[],
): void {
  const { chainId, logs } = view;
  if (view.beyond !== undefined) {
    out.push(
      `SIM8 ${chainId}: generation ${view.beyond} exists, generation ${logs.length} does not`,
    );
  }
  logs.forEach((log, n) => {
    const id = generationId(chainId, n);
    const state = foldAll(log);
    const next = generationId(chainId, n + 1);
    const c0 = state._chain;
    if (n === 0 && c0 && (c0.chainId !== chainId || c0.generation !== 0 || c0.continuedFrom)) {
      out.push(
        `SIM8 ${id}: its start makes it a member of ${c0.chainId} (generation ${c0.generation}), not generation 0 of its own chain`,
      );
    }
    if (n > 0) {
      const c = state._chain;
      const from = generationId(chainId, n - 1);
      if (c?.chainId !== chainId || c.generation !== n || c.continuedFrom?.executionId !== from) {
        out.push(
          `SIM8 ${id}: its start does not make it generation ${n} of ${chainId} after ${from}`,
        );
      }
    }
    const successor = logs[n + 1];
    if (state.status === "continued") {
      const last = log[log.length - 1]?.payload as { generation?: unknown } | undefined;
      if (state._continuedTo !== next || last?.generation !== n + 1) {
        out.push(`SIM8 ${id}: continued to ${state._continuedTo}, not to ${next}`);
      }
      if (!successor) out.push(`SIM8 ${id}: committed EXECUTION_CONTINUED, but ${next} has no log`);
    }
    if (!successor) return;
    if (!["running", "parked", "pending", "continued", "cancelled"].includes(state.status)) {
      out.push(`SIM8 ${id}: ended ${state.status} although its successor ${next} started`);
    }
    const mark = frozenAt.get(n);
    for (const e of mark === undefined ? [] : log.slice(mark)) {
      if (isTerminalEvent(e)) continue;
      out.push(
        `SIM8 ${chainId}: two live generations: ${id} appended ${e.kind} at ${e.seq} after its successor ${next} started`,
      );
    }
  });
}

interface Consumed {
  /** Message keys delivered to the flow (not as duplicates), across the chain. */
  delivered: Set<string>;
}

/** SIM9's safety part; returns what the chain's generations consumed. */
function consumption(view: ChainView, out: string[]): Consumed {
  const { chainId, logs } = view;
  const streams = new Map<string, InboxMessage[]>();
  for (const m of view.messages) streams.set(m.topic, [...(streams.get(m.topic) ?? []), m]);
  const taken = new Map<string, number>();
  const delivered = new Map<string, string>();
  let previous: ExecutionState | undefined;
  logs.forEach((log, n) => {
    const id = generationId(chainId, n);
    let s = initialState(id);
    for (const e of log) {
      if (e.kind !== "MESSAGE_CONSUMED") {
        s = fold(s, e);
        if (e.seq === 0 && previous) checkCarried(id, previous, s, out);
        continue;
      }
      const p = e.payload as { topic?: string; seq?: number; key?: string; duplicate?: boolean };
      const topic = p.topic ?? "";
      const before = cursorOf(s, topic);
      s = fold(s, e);
      if (copied(e)) {
        // A fork's copy of its origin's consumption: it settles a receive of the re-run, and is
        // no consumption of the fork's own stream (V3).
        if (n > 0) out.push(`SIM11 ${id} (at ${e.seq}): a copied consumption in generation ${n}`);
        if (cursorOf(s, topic) !== before) {
          out.push(`SIM9 ${id} (at ${e.seq}): a copied consumption moved the fork's inbox`);
        }
        continue;
      }
      // The fold ignores a consumption at or before the cursor, or of a key already taken (N1).
      if (cursorOf(s, topic) === before) continue;
      const stream = streams.get(topic) ?? [];
      const i = taken.get(topic) ?? 0;
      const m = stream.findIndex((x) => x.seq === p.seq);
      const at = `${id} (at ${e.seq})`;
      if (m < 0) out.push(`SIM9 ${at}: took message ${p.seq} of ${topic}, which was never sent`);
      else if (m < i) out.push(`SIM9 ${at}: took message ${p.seq} of ${topic} a second time`);
      else if (m > i) out.push(`SIM9 ${at}: took message ${p.seq}, skipping ${stream[i]?.seq}`);
      if (m >= 0) taken.set(topic, m + 1);
      const sent = stream[m];
      if (sent && sent.key !== p.key) {
        out.push(`SIM9 ${at}: message ${p.seq} has key ${sent.key}, consumed as ${p.key}`);
      }
      const key = p.key ?? "";
      if (p.duplicate === true) {
        if (!delivered.has(key)) {
          out.push(`SIM9 ${at}: message ${p.seq} dropped as a duplicate of ${key}, never received`);
        }
        continue;
      }
      const first = delivered.get(key);
      if (first !== undefined) {
        out.push(`SIM9 ${at}: message ${p.seq} delivered key ${key} again (first at ${first})`);
      }
      delivered.set(key, at);
      const payload = (e.payload as { payload?: Json }).payload ?? null;
      if (sent && canonicalJson(payload) !== canonicalJson(sent.payload)) {
        out.push(`SIM9 ${at}: message ${p.seq} delivered another payload than was sent`);
      }
    }
    previous = s;
  });
  return { delivered: new Set(delivered.keys()) };
}

/** SIM9: a successor starts with the inbox its predecessor left (the cursors and dedupe window). */
function checkCarried(id: string, previous: ExecutionState, s: ExecutionState, out: string[]) {
  const left = canonicalJson(previous._inbox ?? null);
  const carried = canonicalJson(s._inbox ?? null);
  if (left !== carried) {
    out.push(`SIM9 ${id}: started with the inbox ${carried}, its predecessor left ${left}`);
  }
}

/**
 * What SIM8 and SIM9 require once everything has ended: no generation outlived a cancelled one,
 * and a conversation that completed received every message it consumed, one per turn when its
 * receives had no timeout.
 */
export function checkChainEnd(view: ChainView, conversation: Conversation, out: string[]): void {
  const { chainId, logs } = view;
  const states = checkCancelledChain(view, out);
  const head = states[states.length - 1];
  if (head?.status !== "completed") return;
  const quiet: string[] = [];
  const { delivered } = consumption(view, quiet);
  const end = head.output as Partial<ConversationEnd> | undefined;
  const at = generationId(chainId, states.length - 1);
  // A fork's generation 0 carries what its origin had received up to the fork point.
  const carried = carriedReceives(logs[0] ?? []);
  if (end?.received !== carried + delivered.size) {
    const also = carried > 0 ? ` and carried ${carried} from its origin` : "";
    out.push(
      `SIM9 ${at}: received ${end?.received} messages, its chain consumed ${delivered.size}${also}`,
    );
  }
  if (conversation.receiveTimeoutMs !== undefined) return;
  if (carried === 0) {
    for (let i = 0; i < conversation.turns; i++) {
      if (!delivered.has(`m${i}`)) out.push(`SIM9 ${chainId}: completed without receiving m${i}`);
    }
  }
  if (carried + delivered.size !== conversation.turns) {
    out.push(
      `SIM9 ${chainId}: ${conversation.turns} turns received ${delivered.size} messages${carried > 0 ? ` (and ${carried} carried from its origin)` : ""}`,
    );
  }
}

/** SIM8 once everything has ended: no generation outlived a cancelled one. Returns the states. */
export function checkCancelledChain(view: ChainView, out: string[]): ExecutionState[] {
  const states = view.logs.map((log) => foldAll(log));
  states.forEach((s, n) => {
    const next = states[n + 1];
    if (s.status === "cancelled" && next && next.status !== "cancelled") {
      out.push(
        `SIM8 ${generationId(view.chainId, n + 1)}: ended ${next.status}, after its predecessor was cancelled`,
      );
    }
  });
  return states;
}

/** A copied envelope of a fork. */
function copied(e: Envelope): boolean {
  return e.meta?.forkedFrom !== undefined;
}

/**
 * What a chain's generation 0 had received before it ran: a successor's carry (none for a chain
 * started by the operator) plus, for a fork, the receives its copied consumptions answer.
 */
function carriedReceives(log: readonly Envelope[]): number {
  const input = (log[0]?.payload as { input?: Partial<Spec> } | undefined)?.input;
  const receives = new Set<string>();
  for (const e of log) {
    if (e.kind !== "MESSAGE_CONSUMED" || !copied(e)) continue;
    const p = e.payload as { callId?: string; name?: string; duplicate?: boolean };
    if (p.duplicate !== true && p.name === "receive") receives.add(p.callId ?? "");
  }
  return (input?.chain?.done?.received ?? 0) + receives.size;
}

/** A fork the operator made: of which execution, at which sequence number. */
export interface ForkOrigin {
  origin: string;
  at: number;
}

/**
 * SIM11 on a fork's log (generation 0 of its chain) and its origin's log: the prefix is copied
 * event for event, marked as copied, and nothing after it is.
 */
export function checkFork(
  id: string,
  log: readonly Envelope[],
  fork: ForkOrigin,
  origin: readonly Envelope[],
  out: string[],
): void {
  const { at } = fork;
  if (log.length < at + 1) {
    out.push(`SIM11 ${id}: has ${log.length} events, its fork point is ${at}`);
  }
  if (origin.length < at + 1) {
    out.push(`SIM11 ${id}: forked at ${at}, but ${fork.origin} has ${origin.length} events`);
  }
  const member = origin[0] !== undefined && foldAll(origin.slice(0, 1))._chain !== undefined;
  const from = canonicalJson({ executionId: fork.origin, seq: at });
  log.forEach((e, i) => {
    const where = `SIM11 ${id} (at ${e.seq})`;
    if (i > at) {
      if (copied(e) || e.meta?.forkChain !== undefined) {
        out.push(`${where}: marked as copied after the fork point ${at}`);
      }
      return;
    }
    const o = origin[i];
    if (!o) return;
    if (
      e.seq !== o.seq ||
      e.kind !== o.kind ||
      e.at !== o.at ||
      canonicalJson(e.payload) !== canonicalJson(o.payload)
    ) {
      out.push(`${where}: ${e.kind} differs from ${fork.origin}'s ${o.kind} at ${o.seq}`);
    }
    if (canonicalJson(e.meta?.forkedFrom ?? null) !== from) {
      out.push(`${where}: meta.forkedFrom is ${JSON.stringify(e.meta?.forkedFrom)}, not ${from}`);
    }
    const stamp = canonicalJson(e.meta?.forkChain ?? null);
    const want = member ? canonicalJson({ chainId: id, generation: 0 }) : "null";
    if (stamp !== want) out.push(`${where}: meta.forkChain is ${stamp}, not ${want}`);
  });
}

/**
 * Whether a refusal to fork `origin` at `at` is legitimate: the log has ended by then, or the
 * fork would be a second waiting execution of its queue with its origin's dedupe key.
 */
export function forkRefusable(origin: readonly Envelope[], at: number, code: string): boolean {
  const ended = origin.slice(0, at + 1).find((e) => isTerminalEvent(e));
  if (code === "LOOM_FORK_PAST_CONTINUATION") return ended?.kind === "EXECUTION_CONTINUED";
  if (code === "LOOM_INVALID_INPUT") {
    return ended !== undefined && ended.kind !== "EXECUTION_CONTINUED";
  }
  // S27: the fork copies its origin's queue mark, dedupe key included, and the store refuses it
  // while the origin (or another of that key) still waits (docs/simulation.md, found with queues).
  if (code === "LOOM_QUEUE_DUPLICATE") {
    const p = origin[0]?.payload;
    return isPlainObject(p) && isPlainObject(p.queue) && typeof p.queue.dedupe === "string";
  }
  return false;
}
