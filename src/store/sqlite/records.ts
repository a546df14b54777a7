/**
 * Forks by origin (S21) and the fleet's members (S22) on SQLite. The fork rows are written by the
 * append (append.ts A3) and removed by a delete (retention.ts); this module reads them. Member rows
 * are written by each process sharing the file (a `loom worker`, a `loom ui`) and read by all.
 */
import type Database from "better-sqlite3";
import { MEMBER_ROW_TTL_MS, type ForkStore, type MemberStore } from "../spi-records.ts";
import { memberOf, type MemberRow } from "../rows.ts";

export function sqliteRecords(db: Database.Database): ForkStore & MemberStore {
  const q = {
    forks: db.prepare<[string, number], { fork_id: string; seq: number }>(
      "SELECT fork_id, seq FROM forks WHERE origin_id = ? ORDER BY id LIMIT ?",
    ),
    dropStale: db.prepare("DELETE FROM members WHERE heartbeat_at < ?"),
    putMember: db.prepare(
      `INSERT OR REPLACE INTO members (owner, flows, started_at, heartbeat_at, host, pid)
       VALUES (@owner, @flows, @startedAt, @heartbeatAt, @host, @pid)`,
    ),
    members: db.prepare<[number], MemberRow>(
      `SELECT owner, flows, started_at, heartbeat_at, host, pid FROM members
        WHERE heartbeat_at >= ? ORDER BY owner`,
    ),
    leave: db.prepare("DELETE FROM members WHERE owner = ?"),
    leases: db.prepare<
      [string, number, number],
      { execution_id: string; fence: number; expires_at: number }
    >(
      `SELECT execution_id, fence, expires_at FROM leases
        WHERE owner = ? AND expires_at > ? ORDER BY execution_id LIMIT ?`,
    ),
  };
  const heartbeatTx = db.transaction((row: Record<string, unknown>, dropBefore: number) => {
    q.dropStale.run(dropBefore);
    q.putMember.run(row);
  });

  return {
    async forksOf(originId, limit) {
      return q.forks.all(originId, limit).map((r) => ({ executionId: r.fork_id, seq: r.seq }));
    },

    async heartbeat(m) {
      const row = {
        owner: m.owner,
        flows: JSON.stringify(m.flows),
        startedAt: m.startedAtMs,
        heartbeatAt: m.lastHeartbeatMs,
        host: m.host ?? null,
        pid: m.pid ?? null,
      };
      heartbeatTx.immediate(row, m.lastHeartbeatMs - MEMBER_ROW_TTL_MS);
    },

    async members(sinceMs) {
      return q.members.all(sinceMs).map(memberOf);
    },

    async leaveFleet(owner) {
      q.leave.run(owner);
    },

    async leasesOf(owner, nowMs, limit) {
      return q.leases.all(owner, nowMs, limit).map((r) => ({
        executionId: r.execution_id,
        fence: r.fence,
        expiresAtMs: r.expires_at,
      }));
    },
  };
}
