/**
 * What the simulator checks of children (issue 8; runtime/children.ts O1..O4, fold/children.ts
 * F8, F9). Numbered on from invariants.ts:
 *
 * SIM12. No child without its spawn: every execution of the child flow has a parent link
 *        (`_parent`) whose parent's log, read after the child's, has a CHILD_STARTED for it with
 *        the same call id, `detached` and flow, and with the budget the child started with; the
 *        link names the parent's chain; the child's id is `childIdOf(parent, callId)`; its
 *        successors carry the same link.
 * SIM13. Each child's slot is settled once. In each log, the fold keeps the first CHILD_DONE of
 *        a child (its `_children` entry and every awaitChild frame on it take that outcome, and a
 *        settled frame's outcome never changes); across a chain's generations, the CHILD_DONE of
 *        a child whose slot an earlier generation settled counts again only in a generation that
 *        awaits that child (a detached child from the carry), and then with the same outcome.
 * SIM14. Once everything has ended (quiescence): every attached child whose slot was open when
 *        its parent ended cancelled or continued has ended (cascaded, or ended on its own); a
 *        cascade cancels only such a child (never a detached one; the execution it names is a
 *        generation of the child's parent chain that ended so), the chain closure (K4) aside; no
 *        execution still waits on a child whose chain has ended; and no supervisor wake row is
 *        left.
 * SIM15. A CHILD_DONE says how the child's chain ended: its status is the status of the chain's
 *        head (never `continued`), and its output, error and resources are the head's (what the
 *        chain spent, with the grants it passed on to children still out, F10). A spawn whose id
 *        held someone else's execution settles failed (LOOM_CHILD_CONFLICT, O1): not a child's end.
 */
import { canonicalJson, type Json } from "../src/kernel/json.ts";
import { isTerminalEvent, isTerminalStatus, type Envelope } from "../src/kernel/events.ts";
import { childIdOf, childOf, readChildOutcome } from "../src/kernel/children.ts";
import { fold, foldAll } from "../src/fold/fold.ts";
import { initialState, type ExecutionState } from "../src/fold/state.ts";
import { AWAIT_CHILD, openAttachedChildren, spentWithGrants } from "../src/fold/children.ts";
import { generationId, type ChainView } from "./invariants.ts";

type Payload = { [k: string]: Json | undefined };
const payloadOf = (e: Envelope): Payload =>
  e.payload !== null && typeof e.payload === "object" && !Array.isArray(e.payload) ? e.payload : {};
const str = (v: Json | undefined): string => (typeof v === "string" ? v : "");

/** SIM12 on a child chain (as one read saw it) and its parent's log, read after it. */
export function checkChildStart(
  child: ChainView,
  parentLog: readonly Envelope[],
  out: string[],
): void {
  const id = child.chainId;
  const first = child.logs[0]?.[0];
  if (!first) return;
  const link = foldAll([first])._parent;
  if (!link) {
    out.push(`SIM12 ${id}: a child flow's execution with no parent`);
    return;
  }
  const parent = link.executionId;
  if (childIdOf(parent, link.callId) !== id) {
    out.push(`SIM12 ${id}: its parent link names ${parent}'s call ${link.callId}, not this child`);
  }
  const spawn = parentLog.find((e) => e.kind === "CHILD_STARTED" && payloadOf(e).childId === id);
  if (!spawn) {
    out.push(`SIM12 ${id}: its parent ${parent} has no CHILD_STARTED for it`);
  } else {
    const p = payloadOf(spawn);
    const detached = p.detached === true;
    if (p.callId !== link.callId || detached !== link.detached) {
      out.push(
        `SIM12 ${id}: its parent link (call ${link.callId}, detached ${link.detached}) is not ${parent}'s CHILD_STARTED at ${spawn.seq} (call ${str(p.callId)}, detached ${detached})`,
      );
    }
    const started = payloadOf(first);
    if (p.flow !== started.flow) {
      out.push(`SIM12 ${id}: runs flow ${str(started.flow)}, its parent spawned ${str(p.flow)}`);
    }
    if (canonicalJson(p.budget ?? null) !== canonicalJson(started.budget ?? null)) {
      out.push(
        `SIM12 ${id}: started with the budget ${canonicalJson(started.budget ?? null)}, its parent granted ${canonicalJson(p.budget ?? null)}`,
      );
    }
  }
  const parentChain = parentLog[0] ? (foldAll([parentLog[0]])._chain?.chainId ?? parent) : parent;
  if (parentLog[0] && link.chainId !== parentChain) {
    out.push(
      `SIM12 ${id}: its parent link names the chain ${link.chainId}, its parent's is ${parentChain}`,
    );
  }
  const want = canonicalJson(link);
  child.logs.forEach((log, n) => {
    if (n === 0 || !log[0]) return;
    const got = foldAll([log[0]])._parent;
    if (canonicalJson(got ?? null) !== want) {
      out.push(`SIM12 ${generationId(id, n)}: its parent link is not its chain's ${want}`);
    }
  });
}

/** A child's outcome as the fold keeps it, or the frame's: comparable text. */
const outcomeText = (v: unknown): string => canonicalJson(readChildOutcome(v as Json) ?? null);

/**
 * SIM13 on one consistent read of a (parent) chain. A later generation settles a slot an earlier
 * one settled only by awaiting the child again (a detached child's id in the carry).
 */
export function checkSlots(view: ChainView, out: string[]): void {
  /** Child id -> where and how the chain first settled its slot. */
  const first = new Map<string, { at: string; generation: number; outcome: string }>();
  view.logs.forEach((log, n) => {
    const id = generationId(view.chainId, n);
    let s = initialState(id);
    const frames = new Map<string, string>();
    const awaiting = new Set<string>();
    for (const e of log) {
      const p = payloadOf(e);
      const childId = str(p.childId);
      const before =
        e.kind === "CHILD_DONE" ? canonicalJson(slotOf(s, childId) ?? null) : undefined;
      s = fold(s, e);
      const at = `${id} (at ${e.seq})`;
      if (e.kind === "SUSPENDED" && p.name === AWAIT_CHILD) awaiting.add(childId);
      if (e.kind === "CHILD_DONE") {
        const kept = slotOf(s, childId);
        const accepted = before === "null" && kept !== undefined;
        if (!accepted && canonicalJson(kept ?? null) !== before) {
          out.push(`SIM13 ${at}: a second CHILD_DONE of ${childId} changed its settled slot`);
        }
        if (accepted) {
          const outcome = outcomeText(p.outcome);
          if (canonicalJson(kept) !== outcome) {
            out.push(
              `SIM13 ${at}: the fold kept another outcome of ${childId} than its CHILD_DONE`,
            );
          }
          const earlier = first.get(childId);
          if (earlier === undefined) first.set(childId, { at, generation: n, outcome });
          else if (!awaiting.has(childId)) {
            out.push(`SIM13 ${at}: settles the slot of ${childId} again (${earlier.at} did)`);
          } else if (earlier.outcome !== outcome) {
            out.push(
              `SIM13 ${at}: ${childId} settled ${outcome}, but ${earlier.at} said ${earlier.outcome}`,
            );
          }
        }
      }
      if (e.kind !== "CHILD_DONE" && e.kind !== "SUSPENDED") continue;
      // A settled awaitChild has the slot's outcome, and keeps it.
      for (const [callId, f] of Object.entries(s.frames)) {
        if (f.kind !== "child" || f.status !== "settled") continue;
        const got = outcomeText(f.output);
        const had = frames.get(callId);
        if (had !== undefined && had !== got) {
          out.push(`SIM13 ${at}: awaitChild ${callId} of ${f.childId} got a second outcome`);
        }
        frames.set(callId, got);
        const slot = slotOf(s, f.childId ?? "");
        if (slot && canonicalJson(slot) !== got) {
          out.push(`SIM13 ${at}: awaitChild ${callId} of ${f.childId} differs from its slot`);
        }
      }
    }
  });
}

const slotOf = (s: ExecutionState, childId: string) => childOf(s._children, childId)?.outcome;

/**
 * SIM15: a CHILD_DONE of `id`'s log against the child's chain, read after that log. A chain
 * cancelled in a start-to-commit window ends twice cancelled (the successor with the chain's
 * closure, K4): its CHILD_DONE may carry either cancel's error.
 */
export function checkChildDone(id: string, e: Envelope, child: ChainView, out: string[]): void {
  const p = payloadOf(e);
  const at = `SIM15 ${id} (at ${e.seq})`;
  const n = child.logs.length - 1;
  const log = child.logs[n];
  if (!log) {
    out.push(`${at}: CHILD_DONE of ${child.chainId}, which has no log`);
    return;
  }
  const head = foldAll(log);
  const said = readChildOutcome(p.outcome);
  // The id held someone else's execution: the spawn settles its slot failed, by design (O1).
  if (said?.error?.code === "LOOM_CHILD_CONFLICT") return;
  const where = `${child.chainId}'s head ${generationId(child.chainId, n)}`;
  if (!isTerminalStatus(head.status) || head.status === "continued") {
    out.push(`${at}: CHILD_DONE says ${said?.status}, but ${where} is ${head.status}`);
    return;
  }
  if (said?.status !== head.status) {
    out.push(`${at}: CHILD_DONE says ${said?.status}, but ${where} ended ${head.status}`);
  }
  const same = (a: unknown, b: unknown) => canonicalJson(a ?? null) === canonicalJson(b ?? null);
  if (!same(said?.output, head.output)) {
    out.push(`${at}: CHILD_DONE's output is not the output of ${where}`);
  }
  const cancels = child.logs.map((l) => foldAll(l)).filter((s) => s.status === "cancelled");
  const errors = head.status === "cancelled" ? cancels.map((s) => s.error?.message) : [];
  if (said?.error?.message !== head.error?.message && !errors.includes(said?.error?.message)) {
    out.push(`${at}: CHILD_DONE's error is not the error of ${where}`);
  }
  const spent = spentWithGrants(head);
  if (!same(said?.resources, Object.keys(spent).length > 0 ? spent : undefined)) {
    out.push(`${at}: CHILD_DONE's resources are not what ${where} spent`);
  }
}

const CASCADING = ["cancelled", "continued"];

/** How many children a cascade cancelled (not counting a chain's own closure, K4). */
export function cascadesIn(logs: ReadonlyMap<string, readonly Envelope[]>): number {
  let n = 0;
  for (const log of logs.values()) {
    const last = log[log.length - 1];
    if (last?.kind !== "EXECUTION_CANCELLED" || !log[0]) continue;
    const reason = payloadOf(last).reason;
    if (reason === null || typeof reason !== "object" || Array.isArray(reason)) continue;
    const start = foldAll([log[0]]);
    const predecessor = start._chain?.continuedFrom?.executionId;
    if (reason.kind === "cascade" && start._parent && reason.parent !== predecessor) n++;
  }
  return n;
}

/**
 * SIM14, once everything has ended: `logs` has every log of the run (every generation of every
 * chain, children's too); `wakeRows` the supervisor rows (`child:`, `cascade:`) still due.
 */
export function checkQuiesced(
  logs: ReadonlyMap<string, readonly Envelope[]>,
  wakeRows: readonly { executionId: string; timerId: string }[],
  out: string[],
): void {
  const states = new Map<string, ExecutionState>();
  for (const [id, log] of logs) states.set(id, foldAll(log));
  const headOf = (chainId: string) => {
    let n = 0;
    while (logs.has(generationId(chainId, n + 1))) n++;
    return generationId(chainId, n);
  };
  for (const [id, s] of states) {
    if (CASCADING.includes(s.status)) {
      for (const childId of openAttachedChildren(s)) {
        const head = headOf(childId);
        const h = states.get(head);
        // A spawn whose child was never written (its parent ended first) has nothing to end.
        if (!h) continue;
        if (!isTerminalStatus(h.status) || h.status === "continued") {
          out.push(
            `SIM14 ${childId}: an attached child of ${id}, which ended ${s.status}, is still ${h.status} (${head})`,
          );
        }
      }
    }
    checkCascade(id, s, logs.get(id) ?? [], states, out);
    for (const f of Object.values(s.frames)) {
      if (f.kind !== "child" || f.status !== "waiting" || isTerminalStatus(s.status)) continue;
      const head = states.get(headOf(f.childId ?? ""));
      if (head && isTerminalStatus(head.status) && head.status !== "continued") {
        out.push(
          `SIM14 ${id}: still waits on ${f.childId}, which ended ${head.status}: its slot was never settled`,
        );
      }
    }
  }
  for (const row of wakeRows) {
    out.push(
      `SIM14 ${row.executionId}: the wake row ${row.timerId} is left after everything ended`,
    );
  }
}

/** SIM14: a cascade cancels an attached child whose slot its parent's end left open. */
function checkCascade(
  id: string,
  s: ExecutionState,
  log: readonly Envelope[],
  states: ReadonlyMap<string, ExecutionState>,
  out: string[],
): void {
  const last = log[log.length - 1];
  if (!last || last.kind !== "EXECUTION_CANCELLED" || !isTerminalEvent(last)) return;
  const reason = payloadOf(last).reason;
  if (reason === null || typeof reason !== "object" || Array.isArray(reason)) return;
  if (reason.kind !== "cascade") return;
  const from = str(reason.parent);
  // K4: a successor cancelled with its cancelled predecessor (the chain closure).
  if (from !== "" && s._chain?.continuedFrom?.executionId === from) return;
  const link = s._parent;
  const chainId = s._chain?.chainId ?? id;
  const parent = states.get(from);
  // A successor may hold a generation's open children (carried): any generation of the chain.
  if (!link || link.chainId !== (parent?._chain?.chainId ?? from)) {
    out.push(
      `SIM14 ${id}: cancelled by a cascade from ${from}, which is not of its parent's chain`,
    );
    return;
  }
  if (link.detached) {
    out.push(`SIM14 ${id}: a detached child, cancelled by a cascade from ${from}`);
    return;
  }
  if (!parent || !CASCADING.includes(parent.status)) {
    out.push(`SIM14 ${id}: cancelled by a cascade from ${from}, which ended ${parent?.status}`);
  } else if (!openAttachedChildren(parent).includes(chainId)) {
    out.push(`SIM14 ${id}: cancelled by a cascade from ${from}, which had settled its slot`);
  }
}
