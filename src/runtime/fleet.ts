/**
 * A fleet (issue 9): processes on many machines share one store that can claim work and wake its
 * owners (a FleetStore: PostgreSQL). What a runtime does differently there:
 *
 * Invariants (tests cite L1..L4):
 * L1. Recovery claims: runnable executions (pending or running, with no live lease: new ones
 *     recorded with `drive: false`, released ones, abandoned ones whose lease expired) are taken
 *     with their leases in one claim (store S17), so two members never drive the same execution
 *     at once, and a member claims no more than it has room for (`maxActive`).
 * L2. A dead member's executions are claimed once their leases expire: nothing but the lease's
 *     expiry hands them over, and the fence moved by the claim refuses whatever a paused owner
 *     appends when it wakes (store S1, S6).
 * L3. Wakes are best effort (store S18): a runnable execution, a due timer, a posted notice or a
 *     message makes the member act at once instead of at its next poll; a lost wake costs one
 *     poll interval, never correctness, since every duty re-reads the store.
 * L4. A member listens only while its runtime runs the background loop; closing it stops the
 *     listening before the store closes.
 */
import type { FleetStore, FleetWake, Lease, Store } from "../store/spi.ts";

export interface FleetDeps {
  store: Store & FleetStore;
  ownerId: string;
  leaseTtlMs: number;
  now(): number;
  /** Run the background duties now (a runnable execution, a due timer, a message). */
  tick(afterMs: number): void;
  /** Take this owner's notices now (a cancel from another process). */
  takeNotices(): void;
  report(error: unknown): void;
}

/** The most executions one claim takes (L1); a member claims again while they keep coming. */
export const CLAIM_BATCH = 50;
/** How many executions it cannot drive a member claims past, at most, to reach ones it can. */
export const MAX_CLAIM_SKIP = 1000;

export class FleetMember {
  private unlisten: (() => Promise<void>) | undefined;
  private listening: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly deps: FleetDeps) {}

  /** L3, L4: subscribes to the store's wakes. */
  listen(): void {
    this.listening = this.deps.store
      .listen((wake) => this.onWake(wake))
      .then(
        async (stop) => {
          if (this.closed) await stop();
          else this.unlisten = stop;
        },
        (e: unknown) => this.deps.report(e),
      );
  }

  /** L1: up to `limit` runnable executions of `flows`, each with its lease taken for this owner. */
  claim(flows: readonly string[], limit: number): Promise<Lease[]> {
    if (flows.length === 0 || limit <= 0) return Promise.resolve([]);
    return this.deps.store.claimRunnable(this.deps.ownerId, {
      flows,
      limit,
      ttlMs: this.deps.leaseTtlMs,
      nowMs: this.deps.now(),
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listening;
    const stop = this.unlisten;
    this.unlisten = undefined;
    await stop?.();
  }

  private onWake(wake: FleetWake): void {
    if (this.closed) return;
    switch (wake.kind) {
      case "notice":
        if (wake.owner === this.deps.ownerId) this.deps.takeNotices();
        return;
      case "timer":
        this.deps.tick(Math.max(0, wake.wakeAtMs - this.deps.now()));
        return;
      case "runnable":
      case "message":
      case "queue":
        this.deps.tick(0);
        return;
    }
  }
}
