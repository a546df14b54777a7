/**
 * Forks by origin (S21) and the fleet's members (S22) in the memory store. The fork rows are
 * written by the append (append.ts A3) and removed by a delete (retention.ts); this module reads
 * them, and keeps the member rows, copied in and out.
 */
import { MEMBER_ROW_TTL_MS, type ForkStore, type MemberStore } from "../spi-records.ts";
import { live, type Handle } from "./data.ts";

const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function memoryRecords(h: Handle): ForkStore & MemberStore {
  const { data } = h;
  return {
    async forksOf(originId, limit) {
      live(h);
      return (data.forks.get(originId) ?? []).slice(0, limit).map((f) => ({ ...f }));
    },

    async heartbeat(member) {
      live(h);
      for (const [owner, m] of data.members) {
        if (m.lastHeartbeatMs < member.lastHeartbeatMs - MEMBER_ROW_TTL_MS) {
          data.members.delete(owner);
        }
      }
      data.members.set(member.owner, structuredClone(member));
    },

    async members(sinceMs) {
      live(h);
      return [...data.members.values()]
        .filter((m) => m.lastHeartbeatMs >= sinceMs)
        .sort((a, b) => byKey(a.owner, b.owner))
        .map((m) => structuredClone(m));
    },

    async leaveFleet(owner) {
      live(h);
      data.members.delete(owner);
    },

    async leasesOf(owner, nowMs, limit) {
      live(h);
      return [...data.leases.values()]
        .filter((l) => l.owner === owner && l.expiresAtMs > nowMs)
        .sort((a, b) => byKey(a.executionId, b.executionId))
        .slice(0, limit)
        .map(({ executionId, fence, expiresAtMs }) => ({ executionId, fence, expiresAtMs }));
    },
  };
}
