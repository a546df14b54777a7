/**
 * Leases in the memory store (S6). A call runs whole on the JavaScript thread, so an acquire is a
 * compare-and-set (`leaseAvailable`, append-check.ts) that no other call interleaves with; every
 * acquire moves the fence by one. A release of a pending or running execution wakes the fleet
 * (S18, fleet.ts).
 */
import { leaseAvailable } from "../append-check.ts";
import type { AcquireOptions, Lease, LeaseStore } from "../spi.ts";
import { live, wake, type Handle } from "./data.ts";
import { releaseWakes } from "./fleet.ts";

export function memoryLeases(h: Handle): LeaseStore {
  const { data } = h;
  return {
    async acquireLease(id, owner, opts: AcquireOptions) {
      live(h);
      const current = data.leases.get(id);
      if (!leaseAvailable(current, owner, opts)) return undefined;
      const lease: Lease = {
        executionId: id,
        owner,
        fence: (current?.fence ?? 0) + 1,
        expiresAtMs: opts.nowMs + opts.ttlMs,
      };
      data.leases.set(id, lease);
      return { ...lease };
    },

    async renewLease(id, owner, fence, opts) {
      live(h);
      const current = data.leases.get(id);
      if (!current || current.owner !== owner || current.fence !== fence) return false;
      current.expiresAtMs = opts.nowMs + opts.ttlMs;
      return true;
    },

    async releaseLease(id, owner, fence) {
      live(h);
      const current = data.leases.get(id);
      if (current && current.owner === owner && current.fence === fence) {
        current.owner = undefined;
        wake(h, () => releaseWakes(id, data.executions.get(id)?.status, data.queues.get(id)?.name));
      }
    },

    async getLease(id) {
      live(h);
      const current = data.leases.get(id);
      return current ? { ...current } : undefined;
    },
  };
}
