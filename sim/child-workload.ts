/**
 * The children of the simulator's workload (issue 8): spawn ops added to the flows the operator
 * starts, from a PRNG of their own (so the rest of a seed's workload is the one it drew before
 * children). A spawn op spawns 1 to 3 children in turn, then awaits those it should; a child runs
 * the flow `sim-child` (workload.ts), whose input is its ChildSpec: a few ops (steps, decisions,
 * sleeps, suspends, now and then a spawn of its own), run again in each generation when it
 * continues as new, and a failure at the end when its spec says so.
 *
 * Some children are detached (a cancel or rotation of the parent does not cascade to them); some
 * are awaited, some not; a detached child a conversation does not await is carried to its
 * successor, which awaits it (O7). Spawns land in the ops of generation 0, in the branches of a
 * parallel, and in a conversation's turns, so parents rotate while their children run.
 */
import type { Prng } from "./prng.ts";
import { randomOps, type Op, type Spec } from "./workload.ts";

/** What a child runs: its input, and (with `generation`, `sum`) its successors' carry. */
export interface ChildSpec {
  ops: Op[];
  /** How many times the child continues as new before it ends. */
  rotations: number;
  /** The child throws after the ops of its last generation. */
  fail?: true;
  /** The carry: the generation (absent in generation 0) and what the ones before added up. */
  generation?: number;
  sum?: number;
}

/** One child of a spawn op: how it is spawned, and what it runs. */
export interface ChildPlan {
  /** The spawn key (default: the flow's name); the child is `<parent>::<key>#<i>`. */
  key?: string;
  detached?: true;
  /** The spawning op awaits it (a failed or cancelled child counts 0). */
  await: boolean;
  /** The spawn's `budget` option: the child's own, or at most this of the parent's grant. */
  budgetTokens?: number;
  deadlineMs?: number;
  spec: ChildSpec;
}

/** How deep children spawn: a child's child spawns none. */
export const MAX_CHILD_DEPTH = 2;

/** Adds spawn ops to `spec` (about 2 flows in 5). */
export function addChildren(spec: Spec, prng: Prng): void {
  if (!prng.chance(0.4)) return;
  for (let k = prng.chance(0.25) ? 2 : 1; k > 0; k--) insert(prng, spec.ops, randomSpawn(prng, 1));
  const parallel = spec.ops.find((o) => o.op === "parallel");
  if (parallel && prng.chance(0.3)) {
    insert(prng, prng.pick(parallel.branches), randomSpawn(prng, 1));
  }
  // A turn's spawn runs once per turn: so that parents rotate while their children run.
  if (spec.chain && prng.chance(0.4)) insert(prng, spec.chain.turn, randomSpawn(prng, 1));
}

function insert(prng: Prng, ops: Op[], op: Op): void {
  ops.splice(prng.int(0, ops.length), 0, op);
}

function randomSpawn(prng: Prng, depth: number): Op {
  const children: ChildPlan[] = [];
  for (let i = prng.int(1, 3); i > 0; i--) children.push(randomChild(prng, depth));
  return { op: "spawn", children };
}

function randomChild(prng: Prng, depth: number): ChildPlan {
  const ops = randomOps(prng, prng.int(0, 4), false);
  if (depth < MAX_CHILD_DEPTH && prng.chance(0.15)) insert(prng, ops, randomSpawn(prng, depth + 1));
  const spec: ChildSpec = { ops, rotations: prng.chance(0.25) ? prng.int(1, 3) : 0 };
  if (prng.chance(0.15)) spec.fail = true;
  const plan: ChildPlan = { await: prng.chance(0.6), spec };
  if (prng.chance(0.4)) plan.key = prng.pick(["a", "b"]);
  if (prng.chance(0.3)) plan.detached = true;
  if (prng.chance(0.2)) plan.budgetTokens = prng.int(5, 80);
  if (prng.chance(0.1)) plan.deadlineMs = prng.int(100, 3000);
  return plan;
}
