/**
 * `runtime.applyRetention(policy)`: terminal executions older than a policy are released
 * (deleted whole), except the generations chain routing still needs, so every surviving id of a
 * chain still routes to its head (ADR 0109 D2 "Head resolution is ROUTED", residual (0)).
 * `continued` is terminal for retention: a predecessor may go because its successor's sequence 0
 * was durable before its commit (D2).
 *
 * Invariants (tests cite T1..T4):
 * T1. Only terminal executions are released, each whole or not at all (store S13): those whose
 *     status the policy names (default: every terminal status, `continued` included) and whose
 *     last event is older than `terminalOlderThanMs` on the runtime clock. The inbox stream of a
 *     chain is not touched.
 * T2. A chain stays routable (chain-routing.ts K7, K8): while its head may still rotate (pending,
 *     running, parked) every generation in liveKeepSet(head) stays; once its head ended (and did
 *     not continue) every generation in routeKeepSet(head), the head included. So routing from
 *     any surviving id reaches the head, now and after any later rotation. An execution that
 *     never continued (a chain of one generation) is released like any other.
 * T3. A chain whose head cannot be resolved (routing refuses, or stops at a continued generation
 *     whose successor is out of reach) loses nothing in that pass.
 * T4. A malformed policy is refused before anything is read or deleted.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import {
  isTerminalStatus,
  TERMINAL_STATUSES,
  type EventKind,
  type ExecutionStatus,
} from "../kernel/events.ts";
import type { Clock } from "../kernel/clock.ts";
import { endEvent } from "./load-state.ts";
import {
  liveKeepSet,
  memberOf,
  routeKeepSet,
  routeToHead,
  type Member,
  type RoutingDeps,
} from "./chain-routing.ts";

export interface RetentionPolicy {
  /** Terminal executions whose last event is at least this old (runtime clock) are released. */
  terminalOlderThanMs: number;
  /** Which terminal statuses are released (default: all of them, `continued` included). */
  statuses?: readonly ExecutionStatus[];
}

export interface RetentionDeps extends RoutingDeps {
  clock: Clock;
}

const PAGE = 200;

/** T4: the policy's age and statuses, or InvalidInputError. */
function checkedPolicy(policy: unknown): { olderThanMs: number; statuses: ExecutionStatus[] } {
  if (policy === null || typeof policy !== "object") {
    throw new InvalidInputError("a retention policy is an object { terminalOlderThanMs }");
  }
  const { terminalOlderThanMs, statuses } = policy as Partial<RetentionPolicy>;
  if (
    typeof terminalOlderThanMs !== "number" ||
    !Number.isFinite(terminalOlderThanMs) ||
    terminalOlderThanMs < 0
  ) {
    throw new InvalidInputError("terminalOlderThanMs must be a finite number of ms >= 0");
  }
  const terminal = [...TERMINAL_STATUSES];
  if (statuses === undefined) return { olderThanMs: terminalOlderThanMs, statuses: terminal };
  const named: unknown = statuses;
  const refuse = () =>
    new InvalidInputError(
      `retention statuses must be an array of terminal ones (${terminal.join(", ")})`,
    );
  if (!Array.isArray(named)) throw refuse();
  const checked: ExecutionStatus[] = [];
  for (const s of named as unknown[]) {
    const status = terminal.find((t) => t === s);
    if (status === undefined) throw refuse();
    checked.push(status);
  }
  return { olderThanMs: terminalOlderThanMs, statuses: checked };
}

/** The kind of `id`'s terminal event when its log ends in one (two point reads). */
async function endOf(deps: RoutingDeps, id: string): Promise<EventKind | undefined> {
  return (await endEvent(deps.store, id))?.kind;
}

/**
 * T2, T3: the generations of `member`'s chain that stay, or "all". The head is routed from the
 * chain id (generation 0, the address every caller has, which every keep set holds), or from
 * `member` when generation 0 has no log.
 */
async function keepSetOf(deps: RoutingDeps, member: Member): Promise<ReadonlySet<number> | "all"> {
  const { chainId } = member.chain;
  let headId: string;
  try {
    headId = await routeToHead(deps, chainId).catch(async (e: unknown) => {
      if ((await deps.store.head(chainId)) >= 0) throw e;
      return routeToHead(deps, member.id);
    });
  } catch {
    return "all";
  }
  const head = await memberOf(deps.store, headId);
  if (!head || head.chain.chainId !== chainId) return "all";
  const generation = head.chain.generation;
  const end = await endOf(deps, headId);
  if (end === undefined) return new Set(liveKeepSet(generation));
  if (end === "EXECUTION_CONTINUED") return "all";
  return new Set(generation === 0 ? [] : routeKeepSet(generation));
}

/** Releases what `policy` names (T1..T4); returns the ids released, in id order. */
export async function releaseByPolicy(
  deps: RetentionDeps,
  policy: RetentionPolicy,
): Promise<string[]> {
  const { olderThanMs, statuses } = checkedPolicy(policy);
  const cutoffMs = deps.clock.now() - olderThanMs;
  const chains = new Map<string, Promise<ReadonlySet<number> | "all">>();
  const released: string[] = [];
  let afterId: string | undefined;
  for (;;) {
    const page = await deps.store.list({
      status: statuses,
      limit: PAGE,
      ...(afterId === undefined ? {} : { afterId }),
    });
    for (const x of page) {
      if (!isTerminalStatus(x.status) || x.updatedAtMs > cutoffMs) continue;
      const member = await memberOf(deps.store, x.executionId);
      if (!member) continue;
      const { chainId } = member.chain;
      let keep = chains.get(chainId);
      if (!keep) {
        keep = keepSetOf(deps, member);
        chains.set(chainId, keep);
      }
      const kept = await keep;
      if (kept === "all" || kept.has(member.chain.generation)) continue;
      // T1: the log says terminal too, at the moment of the delete (E4: it stays so).
      if ((await endOf(deps, x.executionId)) === undefined) continue;
      if (await deps.store.deleteExecution(x.executionId)) released.push(x.executionId);
    }
    if (page.length < PAGE) return released;
    afterId = page[page.length - 1]?.executionId;
  }
}
