/**
 * The fleet's members (issue 25): which runtimes run, what flows each runs, when each last beat,
 * and the executions each drives now. Before this, a member was only visible through the leases
 * it held. Each runtime that runs its background loop keeps a member row in its store (S22): on
 * SQLite every process sharing the file (a `loom worker`, a `loom ui`) sees it; on PostgreSQL the
 * whole fleet does.
 *
 * Invariants (tests cite M1..M4):
 * M1. A runtime running its background loop writes its member row at its loop's first tick, then
 *     at most once per `heartbeatMs` of the runtime clock, and at once when its flows change: a
 *     duty of the loop (background-loop.ts), never a step's, so steps pay nothing for it.
 * M2. A clean close removes the row, once the loop's last duty has settled (so no heartbeat in
 *     flight writes it again).
 * M3. `fleet()` answers the members whose last heartbeat is within STALE_BEATS heartbeat periods
 *     (the reader's `heartbeatMs`) of its clock's now: one that missed more is gone (crashed,
 *     frozen, cut off) and left out; its row is deleted a day later by another member's heartbeat
 *     (S22), and its leases expire on their own (fleet.ts L2). Each member comes with the leases
 *     it holds now (S22 `leasesOf`), at most MAX_LEASES_LISTED.
 * M4. A runtime without the background loop (a command-line read, the dashboard of `loom ui`) is
 *     no member: it writes no row, and reads the others'.
 */
import { hostname } from "node:os";
import type { FleetAnswer, FleetMemberRow } from "./fleet-answer.ts";
import type { RuntimeState } from "./runtime-state.ts";

/** M3: heartbeats a member may miss before it is gone. */
export const STALE_BEATS = 3;
/** M3: the leases listed per member at most. */
export const MAX_LEASES_LISTED = 200;

const HOST = hostname();

/** M1: the background loop's duty: a heartbeat when one is due or the flows changed. */
export async function heartbeat(s: RuntimeState): Promise<void> {
  if (s.closed) return;
  const now = s.clock.now();
  const flows = [...s.flows.keys()].sort();
  const key = flows.join("\n");
  const m = s.membership;
  if (m.lastBeatMs !== undefined && now - m.lastBeatMs < s.heartbeatMs && key === m.flows) return;
  await s.store.heartbeat({
    owner: s.ownerId,
    flows,
    startedAtMs: m.startedAtMs,
    lastHeartbeatMs: now,
    host: HOST,
    pid: process.pid,
  });
  m.lastBeatMs = now;
  m.flows = key;
}

/** M3: the live members, each with the leases it holds now (runtime.ts `fleet`). */
export async function fleet(s: RuntimeState): Promise<FleetAnswer> {
  s.assertOpen();
  const nowMs = s.clock.now();
  const members = await s.store.members(nowMs - STALE_BEATS * s.heartbeatMs);
  const rows: FleetMemberRow[] = [];
  for (const m of members) {
    const leases = await s.store.leasesOf(m.owner, nowMs, MAX_LEASES_LISTED);
    rows.push({ ...m, leases });
  }
  return { members: rows, nowMs };
}
