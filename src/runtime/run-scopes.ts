/**
 * Where a run's body stands: its scopes (the body's own, "", and each ctx.parallel branch), the
 * cursor of each over the calls the log recorded, the call each is making, and the waits it is
 * blocked in. A Run (run.ts) owns one and delegates its scope members to it.
 *
 * Invariants (numbered as in run.ts; R2, R3 and R7 are kept here whole, R1, R6, R8 in part):
 * R1. A waiter wakes only once its settling sequence number is committed (wakeSettled); a
 *     barrier (`committed`), once every event folded is.
 * R2. A call the log already answers is answered from the fold, never re-executed: `claim`
 *     says it is `recorded`, and the caller reads its answer from the state.
 * R3. A re-run that asks for a different call than the log recorded at the same position of the
 *     same scope stops the run with NonDeterminismError naming both; nothing is appended.
 * R6. A stopped run's waits never settle (`halted`); its waiters are dropped, not woken.
 * R7. Calls in one scope are sequential: a call made while another of the same scope is
 *     outstanding is refused (InvalidInputError) before anything is appended. Concurrency goes
 *     through ctx.parallel, whose branches are scopes of their own. A continueAsNew made beside
 *     an open ctx.parallel is ContinueAsNewScopeOpenError, beside a wait
 *     ContinueAsNewWaitOutstandingError (ADR 0109 D1; both are InvalidInputErrors).
 * R8. `quiescent`: every live scope of the body is blocked in a wait.
 */
import type { CallKind } from "../kernel/events.ts";
import {
  ContinueAsNewScopeOpenError,
  ContinueAsNewWaitOutstandingError,
  InvalidInputError,
  NonDeterminismError,
} from "../kernel/errors.ts";
import { isRecorded } from "../fold/settled.ts";
import type { ExecutionState } from "../fold/state.ts";

interface Scope {
  pos: number;
  names: Map<string, number>;
  parallels: number;
  /** The call this scope is making, if any (R7). */
  busy: string | undefined;
  /** Waiting on a wait or on its parallel branches. */
  blocked: boolean;
  live: boolean;
}

interface Waiter {
  scope: string;
  resolve: () => void;
  /** The sequence number whose commit releases the waiter. */
  settleSeq: number | undefined;
  /** A local timer may be armed for the wait (only waitFor arms one). */
  armed: boolean;
}

export interface Claim {
  callId: string;
  /** True when the log already has this call (R2). */
  recorded: boolean;
  /** Takes the position for a new call; call it in the same turn as the append. */
  take(): void;
}

/** The run whose scopes these are, as they see it (Run implements it). */
export interface ScopedRun {
  readonly id: string;
  readonly flow: { readonly name: string };
  readonly state: ExecutionState;
  readonly live: boolean;
  readonly committedSeq: number;
  stop(error: Error): void;
  maybePark(): void;
}

/** The local timers of waits (the runtime's timer service, through RunHost). */
export interface WaitTimers {
  armTimer(executionId: string, callId: string, wakeAtMs: number): void;
  disarmTimer(executionId: string, callId: string): void;
}

/** A claim of a call the log does not have yet: `take` moves the scope's cursor past it. */
class NewCall implements Claim {
  readonly recorded = false;
  constructor(
    readonly callId: string,
    private readonly cursor: Scope,
    private readonly name: string,
    private readonly occurrence: number,
  ) {}

  take(): void {
    this.cursor.pos++;
    this.cursor.names.set(this.name, this.occurrence + 1);
  }
}

function nothing(): void {}

/** What a wait found settled and committed resolves with at once (RunScopes.waitFor). */
const SETTLED: Promise<void> = Promise.resolve();

/** A promise that never settles: what a halted body waits on (R6). */
export function halted<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}

export class RunScopes {
  private readonly scopes = new Map<string, Scope>();
  private readonly waiters = new Map<string, Waiter>();
  /** Who waits for every event folded to be committed (R1: `committed`). */
  private barriers: (() => void)[] = [];

  constructor(
    private readonly run: ScopedRun,
    private readonly timers: WaitTimers,
  ) {
    this.scope("");
  }

  private scope(name: string): Scope {
    let s = this.scopes.get(name);
    if (!s) {
      s = { pos: 0, names: new Map(), parallels: 0, busy: undefined, blocked: false, live: true };
      this.scopes.set(name, s);
    }
    return s;
  }

  /** Marks `scope` as making call `what`; refuses a second outstanding call (R7). */
  begin(scope: string, what: string): void {
    const s = this.scope(scope);
    if (!s.live) {
      throw new InvalidInputError(
        `${what} was called from a ctx.parallel branch that already returned; await every call before a branch returns`,
      );
    }
    if (s.busy !== undefined) {
      const refusal = what === "continueAsNew" ? continueRefusal(s.busy) : undefined;
      if (refusal) throw refusal;
      throw new InvalidInputError(
        `${what} was called while ${s.busy} of the same scope is still running: calls in one scope must be awaited one at a time ` +
          "(use ctx.parallel for concurrency; a step's function cannot make ctx calls)",
      );
    }
    s.busy = what;
  }

  end(scope: string): void {
    this.scope(scope).busy = undefined;
  }

  /** A new branch scope of a ctx.parallel in `parent`. */
  branchScopes(parent: string, count: number): string[] {
    const p = this.scope(parent);
    const base = `${parent}par${p.parallels++}.`;
    return Array.from({ length: count }, (_, i) => {
      const name = `${base}${i}/`;
      this.scope(name).live = true;
      return name;
    });
  }

  branchDone(scope: string): void {
    this.scope(scope).live = false;
    this.run.maybePark();
  }

  setBlocked(scope: string, blocked: boolean): void {
    this.scope(scope).blocked = blocked;
    if (blocked) this.run.maybePark();
  }

  /** Branch scopes of ctx.parallel calls that have not returned. */
  openBranches(): number {
    let n = 0;
    for (const [name, sc] of this.scopes) if (name !== "" && sc.live) n++;
    return n;
  }

  /** R8: every live scope of the body is blocked in a wait. */
  quiescent(): boolean {
    for (const s of this.scopes.values()) if (s.live && !s.blocked) return false;
    return true;
  }

  /** The deterministic id of the next call of `name` in `scope`, checked against the log (R3). */
  claim(scope: string, kind: CallKind, name: string): Claim {
    const state = this.run.state;
    const cursor = this.scope(scope);
    const occurrence = cursor.names.get(name) ?? 0;
    const callId = `${scope}${name}#${occurrence}`;
    const entry = `${kind}:${callId}`;
    const order = Object.hasOwn(state.order, scope) ? state.order[scope] : undefined;
    const recordedEntry = order?.[cursor.pos];
    if (recordedEntry !== undefined) {
      if (recordedEntry !== entry) throw this.diverged(scope, cursor.pos, recordedEntry, entry);
      cursor.pos++;
      cursor.names.set(name, occurrence + 1);
      return { callId, recorded: true, take: nothing };
    }
    if (isRecorded(state, callId) || Object.hasOwn(state._decisions, callId)) {
      throw this.diverged(scope, cursor.pos, "nothing", entry);
    }
    return new NewCall(callId, cursor, name, occurrence);
  }

  private diverged(scope: string, pos: number, recorded: string, asked: string): Error {
    const id = this.run.id;
    const where = scope === "" ? "the flow body" : `scope "${scope}"`;
    const error = new NonDeterminismError(
      `execution "${id}" of flow "${this.run.flow.name}": call ${pos} of ${where} was recorded as ${recorded} but the flow now asks for ${asked}`,
      { executionId: id, scope, position: pos, recorded, asked },
    );
    this.run.stop(error);
    return error;
  }

  // ---- waits ---------------------------------------------------------------------------------------

  /** Resolves once the wait `callId` is settled and its settling event committed (R1). */
  waitFor(scope: string, callId: string): Promise<void> {
    if (!this.run.live) return halted();
    if (this.settledAndCommitted(callId)) return SETTLED;
    return new Promise<void>((resolve) => {
      const state = this.run.state;
      const f = state.frames[callId];
      const waiting = f?.status === "waiting";
      const wakeAtMs = f?.wakeAtMs;
      const arm = waiting && wakeAtMs !== undefined;
      this.waiters.set(callId, {
        scope,
        resolve,
        settleSeq: waiting ? undefined : state.seq,
        armed: arm || this.waiters.get(callId)?.armed === true,
      });
      if (arm) this.timers.armTimer(this.run.id, callId, wakeAtMs);
      this.scope(scope).blocked = true;
      this.wakeSettled();
      this.run.maybePark();
    });
  }

  /**
   * A wait a replay finds settled, with everything folded committed (R1 holds at once) and no
   * waiter of its own: the slow path would register a waiter, block the scope and wake it in
   * the same turn, so the wait resolves as it would, without the waiter or a timer.
   */
  private settledAndCommitted(callId: string): boolean {
    const state = this.run.state;
    if (state.seq > this.run.committedSeq || this.waiters.has(callId)) return false;
    const f = Object.hasOwn(state.frames, callId) ? state.frames[callId] : undefined;
    // A call kept by its value alone settled (fold/settled.ts L3).
    return f === undefined ? isRecorded(state, callId) : f.status !== "waiting";
  }

  /** Marks `seq`, just folded, as the settling event of each waiter whose wait it settled. */
  noteSettled(seq: number): void {
    if (this.waiters.size === 0) return;
    const frames = this.run.state.frames;
    for (const [callId, w] of this.waiters) {
      if (w.settleSeq === undefined && frames[callId]?.status !== "waiting") w.settleSeq = seq;
    }
  }

  /**
   * R1: resolves once every event folded is committed, those folded while it waits included
   * (undefined when it already is), so what comes next never acts on a fact the log may still
   * lose. Never settles if the run stops first (R6).
   */
  committed(): Promise<void> | undefined {
    if (!this.run.live || this.run.committedSeq >= this.run.state.seq) return undefined;
    return new Promise<void>((resolve) => this.barriers.push(resolve));
  }

  /** Wakes each waiter whose settling event is committed, and the barriers once all is (R1). */
  wakeSettled(): void {
    const committedSeq = this.run.committedSeq;
    if (this.barriers.length > 0 && committedSeq >= this.run.state.seq) {
      for (const resolve of this.barriers.splice(0)) resolve();
    }
    if (this.waiters.size === 0) return;
    for (const [callId, w] of this.waiters) {
      if (w.settleSeq === undefined || w.settleSeq > committedSeq) continue;
      this.waiters.delete(callId);
      if (w.armed) this.timers.disarmTimer(this.run.id, callId);
      this.scope(w.scope).blocked = false;
      w.resolve();
    }
  }

  /** The run left this process: its waits never settle here (R6), their timers are disarmed. */
  dropWaiters(): void {
    for (const callId of this.waiters.keys()) this.timers.disarmTimer(this.run.id, callId);
    this.waiters.clear();
    this.barriers = [];
  }
}

/** The calls that wait on something outside the body (a timer, a resume, a message, a child). */
const WAITS: ReadonlySet<string> = new Set(["sleep", "suspend", "receive", "awaitChild"]);

/** R7 for a continueAsNew made while `busy` of its scope is outstanding (ADR 0109 D1). */
function continueRefusal(busy: string): InvalidInputError | undefined {
  if (busy === "parallel") {
    return new ContinueAsNewScopeOpenError(
      "ctx.continueAsNew was called while a ctx.parallel of the same scope is still running: a generation ends only when none of its scopes is open (await the parallel first)",
    );
  }
  if (WAITS.has(busy)) {
    return new ContinueAsNewWaitOutstandingError(
      `ctx.continueAsNew was called while ${busy} of the same scope is still waiting: a wait is a park, not a rotation point (await it first)`,
    );
  }
  return undefined;
}
