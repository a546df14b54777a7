/**
 * The simulator's fleet mode (issue 9). About half the seeds, drawn from a PRNG of their own, run
 * on a fleet's store (`memoryStore({ fleet: true })`: claims S17, wakes S18) with 1 to 3 owner
 * processes at once, each with its own faults and crashes, instead of the one process of the
 * other seeds. Their runtimes then recover by claims (runtime fleet.ts L1, L2) and act on each
 * other's wakes (L3), some of which the faulty store drops; everything else a seed does is drawn
 * as in the other seeds (the fleet's own choices, of a member, draw from the fleet's PRNG).
 *
 * SIM16. One owner at a time: an execution's appends are fenced by its lease (store S3, S6, S17),
 *        so the fences its log records never go back, and each fence that appended belongs to
 *        one process: two members never both drive an execution under one lease, however its
 *        lease passed between them (a claim, an expiry, a release).
 */
import type { Runtime } from "../src/index.ts";
import type { Envelope } from "../src/kernel/events.ts";
import type { ExecutionState } from "../src/fold/state.ts";
import type { AppendBatch, AppendOutcome } from "../src/store/spi.ts";
import type { Incarnation } from "./faulty-store.ts";
import { Prng } from "./prng.ts";

/** A seed's mode: how many owner processes run at once, and whether they share a fleet's store. */
export interface FleetMode {
  fleet: boolean;
  /** Owner processes at once (1 unless `fleet`). */
  size: number;
  /** The fleet's own choices (which member acts, how long one stays down). */
  draw: Prng;
}

/** The mode of `seed`: fleet about half the time, unless `forced` says which. */
export function fleetMode(seed: number, forced?: boolean): FleetMode {
  const draw = new Prng(seed ^ 0xf1ee7);
  const drawn = draw.chance(0.5);
  const fleet = forced ?? drawn;
  return { fleet, size: fleet ? draw.int(1, 3) : 1, draw };
}

/** An owner process: its faulty store and its runtime. */
export interface Member {
  incarnation: Incarnation;
  runtime: Runtime;
}

/** The owner processes of a seed: one, or a fleet's members. */
export class Members {
  readonly all: Member[] = [];
  /** Every incarnation booted, dead ones too (for the claims they made). */
  private readonly booted: Incarnation[] = [];

  constructor(
    private readonly mode: FleetMode,
    private readonly boot: () => Member,
  ) {
    for (let i = 0; i < mode.size; i++) this.all.push(this.start());
  }

  /** The process to act from: the only one, or a member drawn from the fleet's PRNG. */
  any(): Member {
    const only = this.all[0] as Member;
    return this.mode.fleet ? this.mode.draw.pick(this.all) : only;
  }

  /** The states the live members hold in memory for `id` (SIM3), the first member's first. */
  held(id: string): (ExecutionState | undefined)[] {
    return this.all.map((m) => (m.incarnation.dead ? undefined : m.runtime.heldState(id)));
  }

  /** Boots again every member that died, each after its downtime `down(i)` when given. */
  async revive(down?: (member: number) => Promise<unknown>): Promise<void> {
    for (const [i, m] of this.all.entries()) {
      if (!m.incarnation.dead) continue;
      await down?.(i);
      this.all[i] = this.start();
    }
  }

  /** Executions the members' claims took (and learnt of). */
  get claims(): number {
    return this.booted.reduce((n, x) => n + x.claimed, 0);
  }

  private start(): Member {
    const member = this.boot();
    this.booted.push(member.incarnation);
    return member;
  }
}

/** SIM16, on each commit: which process appended under each execution's fence. */
export class FenceOwners {
  private readonly owners = new Map<string, string>();

  record(
    owner: string,
    batches: readonly AppendBatch[],
    outcomes: readonly AppendOutcome[],
    out: string[],
  ): void {
    for (const [i, b] of batches.entries()) {
      if (!outcomes[i]?.ok) continue;
      const key = JSON.stringify([b.executionId, b.fence]);
      const before = this.owners.get(key);
      if (before === undefined) this.owners.set(key, owner);
      else if (before !== owner) {
        out.push(
          `SIM16 ${b.executionId}: ${owner} appended under fence ${b.fence}, which ${before} appended under`,
        );
      }
    }
  }
}

/** SIM16 on a log: the fences its events record (`meta.fence`) never go back. */
export function checkFences(id: string, log: readonly Envelope[], out: string[]): void {
  let last = 0;
  for (const e of log) {
    const fence = e.meta?.fence;
    if (typeof fence !== "number") continue;
    if (fence < last) {
      out.push(`SIM16 ${id}: ${e.kind} at ${e.seq} appended under fence ${fence} after ${last}`);
    }
    last = Math.max(last, fence);
  }
}
