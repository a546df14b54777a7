/**
 * The step attempts running under a run: the AbortController of each, and the cost each reports
 * so far. A Run (run.ts) owns one, hands a controller to each attempt (effect-call.ts), and
 * aborts them all when it stops or ends.
 *
 * Invariants (R6 as run.ts numbers it):
 * A1. An attempt of a run that is no longer live starts aborted, with the run's stop error (R6).
 * A2. When the run stops or ends, every attempt still running is aborted with the reason and
 *     forgotten: nothing it does later can be recorded.
 * A3. A provisional cost that throws reports nothing (a cancel meters the wall time alone).
 */
import { ExecutionEndedError } from "../kernel/errors.ts";
import type { ResourceDelta } from "../kernel/resources.ts";

/** The run whose attempts these are, as they see it (Run implements it). */
export interface AttemptingRun {
  readonly id: string;
  readonly live: boolean;
  readonly stopError: Error | undefined;
}

export class RunAttempts {
  /** Running attempts' provisional costs, by call id (EffectContext.provisional). */
  readonly provisionals = new Map<string, () => ResourceDelta | undefined>();
  private readonly controllers = new Set<AbortController>();

  constructor(private readonly run: AttemptingRun) {}

  /** What the running attempt of `callId` reports it has cost so far, if it reports (A3). */
  provisional(callId: string): ResourceDelta | undefined {
    try {
      return this.provisionals.get(callId)?.();
    } catch {
      return undefined;
    }
  }

  /** An AbortController for one step attempt, aborted if the run stops (A1). */
  controller(): AbortController {
    const c = new AbortController();
    if (!this.run.live) {
      const id = this.run.id;
      c.abort(this.run.stopError ?? new ExecutionEndedError(`execution "${id}" has ended`));
    }
    this.controllers.add(c);
    return c;
  }

  release(c: AbortController): void {
    this.controllers.delete(c);
  }

  /**
   * A2: aborts every attempt still running with `reason` (or what it makes, when there is one to
   * abort), and forgets them; returns the reason used, if any.
   */
  abortAll(reason: Error | (() => Error)): Error | undefined {
    if (this.controllers.size === 0) return reason instanceof Error ? reason : undefined;
    const error = reason instanceof Error ? reason : reason();
    for (const c of this.controllers) c.abort(error);
    this.controllers.clear();
    return error;
  }
}
