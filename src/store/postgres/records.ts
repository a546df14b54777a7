/**
 * Forks by origin (S21) and the fleet's members (S22) on PostgreSQL (migration 5). The fork rows
 * are written by the append routine (append-routine.ts R11) and removed by a delete
 * (retention.ts); this module reads them. Every member of a fleet writes its own member row and
 * reads all of them; the leases each holds are read by owner (the partial index `leases_by_owner`).
 */
import type pg from "pg";
import { MEMBER_ROW_TTL_MS, type ForkStore, type MemberStore } from "../spi-records.ts";
import { memberOf, type MemberRow } from "../rows.ts";
import { run, statement, transaction, type Tables } from "./db.ts";

export function postgresRecords(pool: pg.Pool, t: Tables): ForkStore & MemberStore {
  const s = {
    forks: statement(
      "forks_of",
      `SELECT fork_id, seq FROM ${t.forks} WHERE origin_id = $1 ORDER BY id LIMIT $2`,
    ),
    dropStale: statement("drop_stale_members", `DELETE FROM ${t.members} WHERE heartbeat_at < $1`),
    putMember: statement(
      "put_member",
      `INSERT INTO ${t.members} (owner, flows, started_at, heartbeat_at, host, pid)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (owner) DO UPDATE SET flows = excluded.flows, started_at = excluded.started_at,
         heartbeat_at = excluded.heartbeat_at, host = excluded.host, pid = excluded.pid`,
    ),
    members: statement(
      "members",
      `SELECT owner, flows, started_at, heartbeat_at, host, pid FROM ${t.members}
       WHERE heartbeat_at >= $1 ORDER BY owner`,
    ),
    leave: statement("leave_fleet", `DELETE FROM ${t.members} WHERE owner = $1`),
    leases: statement(
      "leases_of",
      `SELECT execution_id, fence, expires_at FROM ${t.leases}
       WHERE owner = $1 AND expires_at > $2 ORDER BY execution_id LIMIT $3`,
    ),
  };

  return {
    async forksOf(originId, limit) {
      const { rows } = await run<{ fork_id: string; seq: number }>(
        pool,
        s.forks([originId, limit]),
      );
      return rows.map((r) => ({ executionId: r.fork_id, seq: Number(r.seq) }));
    },

    async heartbeat(m) {
      await transaction(pool, async (tx) => {
        tx.send(s.dropStale([m.lastHeartbeatMs - MEMBER_ROW_TTL_MS]));
        const values = [m.owner, JSON.stringify(m.flows), m.startedAtMs, m.lastHeartbeatMs];
        tx.send(s.putMember([...values, m.host ?? null, m.pid ?? null]));
        return Promise.resolve();
      });
    },

    async members(sinceMs) {
      const { rows } = await run<MemberRow>(pool, s.members([sinceMs]));
      return rows.map((r) =>
        memberOf({ ...r, started_at: Number(r.started_at), heartbeat_at: Number(r.heartbeat_at) }),
      );
    },

    async leaveFleet(owner) {
      await run(pool, s.leave([owner]));
    },

    async leasesOf(owner, nowMs, limit) {
      const { rows } = await run<{ execution_id: string; fence: number; expires_at: number }>(
        pool,
        s.leases([owner, nowMs, limit]),
      );
      return rows.map((r) => ({
        executionId: r.execution_id,
        fence: Number(r.fence),
        expiresAtMs: Number(r.expires_at),
      }));
    },
  };
}
