/**
 * Bugs of the runtime (src/) the simulator found: it does not fix them, it steers clear of them
 * (so the seeds test everything else) until they are fixed, and runs into them when told to
 * (`exposeSrcBugs`, `npm run sim -- ... --expose-src-bugs[=name,...]`). Each has a seed that
 * reproduces it with that bug alone exposed; test/sim.test.ts asserts that it still does, so a
 * fix shows up as a failing test that says to drop the workaround.
 *
 * - `await-store-failure` (SIM10): a store's failure inside ctx.awaitChild (reading the child's
 *   outcome, routing to its head) is thrown into the flow, which records it as the execution's
 *   failure. Steered clear of: the world turns it into a crash of the process (workload.ts
 *   `childCallFailed`).
 * - `fork-children` (SIM14, SIM7): a fork whose prefix spawned children waits for good on one of
 *   them that had not ended: its end wakes the origin's chain, never the fork's. Steered clear
 *   of: forks are made before the origin's first child event.
 * - `rotation-resettles` (SIM13): a generation whose awaitChild settled a slot (the child had
 *   ended) and that then continued gets the CHILD_DONE again in its successor, from the wake row
 *   the child's end wrote, routed to the chain's head. Steered clear of: SIM13 lets a later
 *   generation settle a slot again with the same outcome.
 * - `window-child-done` (SIM8): the supervisor appends a CHILD_DONE to a generation in its
 *   start-to-commit window (its successor has started, with the slot carried open): the slot
 *   settles in the predecessor, and the successor's copy of it never does (its grant stays
 *   counted as spent). Steered clear of: SIM8 lets a frozen predecessor append a CHILD_DONE.
 */
export const KNOWN_SRC_BUGS = {
  "await-store-failure": { seed: 1, violation: "SIM10 sim-1-4: EXECUTION_FAILED at 2" },
  "fork-children": { seed: 57, violation: "SIM14 sim-57-0-fork0: still waits on sim-57-0::" },
  "rotation-resettles": {
    seed: 24,
    violation:
      "SIM13 sim-24-4::sim-child#1~1 (at 2): settles the slot of sim-24-4::sim-child#1::sim-child#1 again",
  },
  "window-child-done": {
    seed: 346,
    violation: "SIM8 sim-346-4: two live generations: sim-346-4 appended CHILD_DONE at 30",
  },
} as const;

export type KnownSrcBug = keyof typeof KNOWN_SRC_BUGS;

/** Whether a run that exposes `expose` (all of them: true) runs into `bug`. */
export function exposes(
  expose: boolean | readonly string[] | undefined,
  bug: KnownSrcBug,
): boolean {
  return expose === true || (Array.isArray(expose) && expose.includes(bug));
}
