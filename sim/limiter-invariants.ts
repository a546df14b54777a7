/**
 * SIM18, the rate limiters' invariant (issue 26), on what the world did: every attempt of a
 * limited call (flow-control.ts) is recorded by the `work` effect itself as it begins and ends, on
 * the simulated clock, whichever process ran it and whether that process crashed. The store's
 * answers are taped as they commit (FlowTape, fed by faulty-store.ts beneath its faults): which
 * asks it granted, at which `nowMs`, holding until when, and when each grant was settled.
 *
 * SIM18. For each limiter L with limits (windowMs W, requests, inputTokens, outputTokens, tokens,
 *        concurrent), over every attempt A of a call to L:
 *        (a) A began under a grant of its own: before A began, the store had granted an ask of
 *            A's attempt (`<execution>/<step>/<attempt>/...`, rate-limits.ts RL9) that no other
 *            attempt ran under. An attempt re-run after a crash without a grant of its own rides
 *            on its predecessor's, uncounted.
 *        (b) Window: the attempts counted in any window (t - W, t] number at most `requests`,
 *            and the tokens they metered (input, output, and both together) are at most the
 *            limits, counting each attempt at its start (when the provider counts the request:
 *            rate-limits.ts RL8), and again counting it at its grant's time (the caller's clock
 *            when it reserved). Both hold because the store charges a grant in the windows from
 *            its grant until its `atMs` (its `sentByMs`, or its settle, which both come after
 *            the attempt's start) is a window old (S30, S32); the pruning of S34 happens at the
 *            reservers' clocks, which the faults' delays leave a few milliseconds apart.
 *        (c) Concurrency: A is in flight from its start until its end, and further, until its
 *            grant was settled or its hold (`holdUntilMs`, the step's timeout) passed, whichever
 *            comes first: a process that crashed mid-call never settles, its call may still run at
 *            the provider, and the store holds its slot that long (S30). At no instant are more
 *            attempts of L in flight than `concurrent`.
 *        Both hold under crashes and a fleet's lease takeovers: the counts take in every
 *        process's attempts, dead incarnations' included.
 */
import type { LimiterAnswer, LimiterAsk, RateLimit } from "../src/store/spi.ts";
import type { LimitedCall } from "./workload.ts";

/** A grant the store gave (the first for its id: an ask granted again is not charged again). */
interface Grant {
  atMs: number;
  holdUntilMs: number;
  settledAtMs?: number;
  /** The attempt that ran under it, once one began. */
  claimed?: true;
}

/**
 * The store's flow-control answers, as they committed (faulty-store.ts FlowObserver), and the
 * attempts of limited calls the world ran.
 */
export class FlowTape {
  private readonly grants = new Map<string, Grant>();
  /** The grants by attempt (`<limiter>\n<execution>/<step>/<attempt>/`), in the order given. */
  private readonly byAttempt = new Map<string, Grant[]>();
  readonly attempts: Attempt[] = [];
  /** Asks the store refused (each a wait on the limiter). */
  refused = 0;
  /** Leases admissions took (an admission lost to a crash or a lost reply is taken again). */
  leases = 0;

  constructor(private readonly now: () => number) {}

  /** faulty-store.ts: `admitQueued` committed, taking `n` leases. */
  admitted(n: number): void {
    this.leases += n;
  }

  /** faulty-store.ts: `reserve` committed with this answer. */
  reserved(limiter: string, ask: LimiterAsk, nowMs: number, answer: LimiterAnswer): void {
    if (!answer.granted) {
      this.refused++;
      return;
    }
    const key = `${limiter}\n${ask.id}`;
    if (this.grants.has(key)) return;
    const grant: Grant = { atMs: nowMs, holdUntilMs: ask.holdUntilMs };
    this.grants.set(key, grant);
    // rate-limits.ts RL9: `<execution>/<step>/<attempt>/<owner>@<first ask>`.
    const attempt = `${limiter}\n${ask.id.replace(/[^/]*$/u, "")}`;
    this.byAttempt.set(attempt, [...(this.byAttempt.get(attempt) ?? []), grant]);
  }

  /** faulty-store.ts: `settle` committed. */
  settled(limiter: string, id: string): void {
    const grant = this.grants.get(`${limiter}\n${id}`);
    if (grant && grant.settledAtMs === undefined) grant.settledAtMs = this.now();
  }

  /**
   * The world: an attempt of a limited call begins, under the oldest grant its attempt was given
   * that no attempt ran under yet (a re-run of the attempt has a grant of its own, RL9); the
   * answer ends it.
   */
  begin(call: LimitedCall): () => void {
    const id = `${call.executionId}/${call.stepId}/${call.attempt}`;
    const attempt: Attempt = { call, id, startMs: this.now() };
    const grant = this.byAttempt.get(`${call.limiter}\n${id}/`)?.find((g) => !g.claimed);
    if (grant) {
      grant.claimed = true;
      attempt.grant = grant;
    }
    this.attempts.push(attempt);
    return () => (attempt.endMs ??= this.now());
  }

  /** Attempts whose grant was never settled: their process died mid-call. */
  get unsettled(): number {
    return this.attempts.filter((a) => a.grant && a.grant.settledAtMs === undefined).length;
  }
}

/** One attempt of a limited call: when it ran, under which grant. */
export interface Attempt {
  call: LimitedCall;
  id: string;
  startMs: number;
  endMs?: number;
  grant?: Grant;
}

/** SIM18 over every attempt; `endMs` closes what is still running (the end of the run). */
export function checkLimiters(
  attempts: readonly Attempt[],
  limits: Readonly<Record<string, RateLimit>>,
  endMs: number,
  out: string[],
): void {
  const byLimiter = new Map<string, Attempt[]>();
  for (const a of attempts) {
    if (!a.grant) {
      out.push(`SIM18 ${a.call.executionId}: ${a.id} called ${a.call.limiter} without a grant`);
      continue;
    }
    const list = byLimiter.get(a.call.limiter) ?? [];
    list.push(a);
    byLimiter.set(a.call.limiter, list);
  }
  for (const [name, list] of byLimiter) {
    const limit = limits[name];
    if (!limit) continue;
    // (b) as the provider counts (a call when it arrives: its start), and as the store charges
    // (a call at its grant's time, or later: RL8's sentByMs and the settle move it on).
    checkWindow(name, list, limit, (a) => a.startMs, "starts", out);
    checkWindow(name, list, limit, (a) => a.grant?.atMs ?? a.startMs, "grants", out);
    checkInFlight(name, list, limit, endMs, out);
  }
}

/** SIM18 (b), each attempt counted at `at`. */
function checkWindow(
  name: string,
  list: readonly Attempt[],
  limit: RateLimit,
  at: (a: Attempt) => number,
  counted: string,
  out: string[],
) {
  for (const last of list) {
    const t = at(last);
    const inWindow = list.filter((a) => at(a) > t - limit.windowMs && at(a) <= t);
    const sum = { requests: inWindow.length, inputTokens: 0, outputTokens: 0, tokens: 0 };
    for (const a of inWindow) {
      sum.inputTokens += a.call.inputTokens;
      sum.outputTokens += a.call.outputTokens;
      sum.tokens += a.call.inputTokens + a.call.outputTokens;
    }
    for (const k of ["requests", "inputTokens", "outputTokens", "tokens"] as const) {
      const max = limit[k];
      if (max !== undefined && sum[k] > max) {
        const ids = inWindow.map((a) => `${a.id}@${at(a)}`).join(", ");
        out.push(
          `SIM18 ${name}: ${sum[k]} ${k} in the ${limit.windowMs} ms window ending at ${t} (at their ${counted}), limit ${max} (${ids})`,
        );
        return;
      }
    }
  }
}

/** SIM18 (c) */
function checkInFlight(
  name: string,
  list: readonly Attempt[],
  limit: RateLimit,
  endMs: number,
  out: string[],
) {
  if (limit.concurrent === undefined) return;
  const edges: { t: number; d: number; i: number }[] = [];
  for (const [i, a] of list.entries()) {
    const end = a.endMs ?? endMs;
    const g = a.grant;
    const held = g ? Math.min(g.settledAtMs ?? Infinity, g.holdUntilMs) : end;
    edges.push({ t: a.startMs, d: 1, i }, { t: Math.max(end, held), d: -1, i });
  }
  // At one instant, ends before starts: an interval is [start, until).
  edges.sort((x, y) => x.t - y.t || x.d - y.d);
  const open = new Set<number>();
  for (const e of edges) {
    if (e.d < 0) {
      open.delete(e.i);
      continue;
    }
    open.add(e.i);
    if (open.size > limit.concurrent) {
      const ids = [...open].map((i) => list[i]?.id).join(", ");
      out.push(
        `SIM18 ${name}: ${open.size} calls in flight at ${e.t}, concurrent ${limit.concurrent} (${ids})`,
      );
      return;
    }
  }
}
