/**
 * Taking an execution's lease: at once when it is free, expired, or held by a dead process on
 * this host (owner.ts), or by waiting up to one TTL for a live owner to park or go.
 */
import type { Clock } from "../kernel/clock.ts";
import { LeaseHeldError } from "../kernel/errors.ts";
import type { Lease, Store } from "../store/spi.ts";
import { ownerIsDead } from "./owner.ts";
import { delay } from "./system.ts";

export class Leases {
  constructor(
    private readonly store: Store,
    private readonly ownerId: string,
    private readonly clock: Clock,
    private readonly ttlMs: number,
    /** Throws when the runtime closed, ending a wait. */
    private readonly assertOpen: () => void,
  ) {}

  acquire(id: string, takeoverFence?: number): Promise<Lease | undefined> {
    const opts = { ttlMs: this.ttlMs, nowMs: this.clock.now() };
    return this.store.acquireLease(
      id,
      this.ownerId,
      takeoverFence === undefined ? opts : { ...opts, takeoverFence },
    );
  }

  /** True when another owner that is alive holds `lease` unexpired: leave its execution alone. */
  liveElsewhere(lease: Lease | undefined): boolean {
    const owner = lease?.owner;
    if (!lease || owner === undefined || owner === this.ownerId) return false;
    return lease.expiresAtMs > this.clock.now() && !ownerIsDead(owner);
  }

  /** The fence to take a lease over with when its owner is a dead process on this host. */
  async takeoverFence(id: string): Promise<number | undefined> {
    const current = await this.store.getLease(id);
    const owner = current?.owner;
    const held =
      owner !== undefined && current !== undefined && current.expiresAtMs > this.clock.now();
    return held && owner !== this.ownerId && ownerIsDead(owner) ? current.fence : undefined;
  }

  /** The lease if it is free, expired, or held by a dead process on this host; else undefined. */
  async acquireIfDead(id: string): Promise<Lease | undefined> {
    return this.acquire(id, await this.takeoverFence(id));
  }

  /** Waits for a lease another owner holds, up to one TTL (that owner parks or its lease expires). */
  async acquireWaiting(id: string): Promise<Lease> {
    const giveUpAt = this.clock.now() + this.ttlMs;
    for (let pause = 5; ; pause = Math.min(pause * 2, 200)) {
      this.assertOpen();
      const lease = await this.acquireIfDead(id);
      if (lease) return lease;
      if (this.clock.now() > giveUpAt) {
        const owner = (await this.store.getLease(id))?.owner ?? "another owner";
        throw new LeaseHeldError(
          `execution "${id}" is being driven by ${owner}; try again when it parks`,
        );
      }
      await delay(pause);
    }
  }

  release(id: string, fence: number): Promise<void> {
    return this.store.releaseLease(id, this.ownerId, fence);
  }
}
