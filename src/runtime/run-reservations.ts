/**
 * The reservations of a run's calls in flight (issue 20): what each admitted effect call may
 * spend at most, held against the budgets in force around it until its attempt settles. Budget
 * admission (effects/middleware.ts) adds what the other calls hold to what is spent, so calls
 * running at once (ctx.parallel branches) cannot together pass a budget.
 *
 * Invariants:
 * H1. A call holds at most one reservation: a retried attempt's replaces its last.
 * H2. A reservation is released when its attempt settles (completed, failed, cancelled or
 *     stopped), so a settled call's spend is counted once, as metered, never also as held.
 * H3. What a call holds is never counted against itself.
 */
import { addResources, type ResourceSnapshot } from "../kernel/resources.ts";

interface Held {
  reservation: ResourceSnapshot;
  budgets: readonly string[];
}

export class Reservations {
  private readonly byCall = new Map<string, Held>();

  /** H1: `callId` holds `reservation` against the budgets named. */
  hold(callId: string, reservation: ResourceSnapshot, budgets: readonly string[]): void {
    this.byCall.set(callId, { reservation, budgets });
  }

  /** H2. */
  release(callId: string): void {
    this.byCall.delete(callId);
  }

  /** What the calls in flight other than `callId` hold against `budget` (H3). */
  heldAgainst(budget: string, callId: string): ResourceSnapshot {
    let sum: ResourceSnapshot = {};
    for (const [id, held] of this.byCall) {
      if (id !== callId && held.budgets.includes(budget)) sum = addResources(sum, held.reservation);
    }
    return sum;
  }

  /** Whether `callId` was admitted and holds a reservation now. */
  holds(callId: string): boolean {
    return this.byCall.has(callId);
  }

  get size(): number {
    return this.byCall.size;
  }
}
