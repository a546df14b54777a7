/**
 * Leases on SQLite (S6). An acquire reads the lease row and writes the new one in one
 * `BEGIN IMMEDIATE` transaction, so it is a compare-and-set (`leaseAvailable`, append-check.ts)
 * that no other process's write interleaves with, and every acquire moves the fence by one. It
 * drops what the append path caches about the execution (append.ts A2): its fence moved.
 */
import type Database from "better-sqlite3";
import { leaseAvailable } from "../append-check.ts";
import type { Lease, LeaseStore } from "../spi.ts";
import type { Statements } from "./statements.ts";

export function sqliteLeases(
  db: Database.Database,
  q: Statements,
  forget: (id: string) => void,
): LeaseStore {
  const acquireTx = db.transaction(
    (id: string, owner: string, ttlMs: number, nowMs: number, takeoverFence?: number) => {
      const row = q.getLease.get(id);
      const current = row && {
        owner: row.owner ?? undefined,
        fence: row.fence,
        expiresAtMs: row.expires_at,
      };
      const opts = takeoverFence === undefined ? { nowMs } : { nowMs, takeoverFence };
      if (!leaseAvailable(current, owner, opts)) return undefined;
      const lease: Lease = {
        executionId: id,
        owner,
        fence: (row?.fence ?? 0) + 1,
        expiresAtMs: nowMs + ttlMs,
      };
      q.putLease.run(id, owner, lease.fence, lease.expiresAtMs);
      forget(id);
      return lease;
    },
  );

  return {
    async acquireLease(id, owner, opts) {
      return acquireTx.immediate(id, owner, opts.ttlMs, opts.nowMs, opts.takeoverFence);
    },

    async renewLease(id, owner, fence, opts) {
      return q.renewLease.run(opts.nowMs + opts.ttlMs, id, owner, fence).changes === 1;
    },

    async releaseLease(id, owner, fence) {
      q.releaseLease.run(id, owner, fence);
    },

    async getLease(id) {
      const row = q.getLease.get(id);
      if (!row) return undefined;
      return {
        executionId: id,
        owner: row.owner ?? undefined,
        fence: row.fence,
        expiresAtMs: row.expires_at,
      };
    },
  };
}
