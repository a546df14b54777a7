/**
 * Live deltas (issue 6): the text of a running LLM step as it streams, for the caller in the same
 * process, without journaling each delta (the step records only its final result).
 *
 * The effect publishes through its context (`ectx.publishDelta`); `runtime.deltas(id)` (and
 * `handle.deltas()`) subscribes. A subscriber sees what arrives after it subscribed; when it falls
 * behind, deltas wait in its queue. Nothing here is durable: after a crash or in another process
 * there is only the log.
 *
 * Invariants (tests cite D1, D2; issue 22 item 6):
 * D1. A bus is one runtime's (RuntimeState.deltas): what an execution of one runtime publishes
 *     reaches only that runtime's subscribers, never another runtime's in the same process, whose
 *     store may hold another execution under the same id.
 * D2. A subscription hands out nothing before its `allowed` promise (the caller's authorization)
 *     has resolved true; if it resolves false (nothing to watch) it ends with nothing, and if it
 *     rejects the subscriber gets that error; either way, nothing it queued.
 */
export interface LiveDelta {
  stepId: string;
  text: string;
}

type Listener = (delta: LiveDelta) => void;

/** One runtime's live deltas, by execution id (D1). */
export class DeltaBus {
  private readonly listeners = new Map<string, Set<Listener>>();

  /** Called for every text delta of a stream, through the step's `ectx.publishDelta`. */
  publish(executionId: string, delta: LiveDelta): void {
    const set = this.listeners.get(executionId);
    if (set) for (const l of set) l(delta);
  }

  /**
   * The deltas of `executionId` from now on, until `ended` resolves or the loop is left, handed
   * out once `allowed` resolves true (D2).
   */
  subscribe(
    executionId: string,
    ended: Promise<unknown>,
    allowed: Promise<boolean> = Promise.resolve(true),
  ): AsyncIterableIterator<LiveDelta> {
    const queue: LiveDelta[] = [];
    let wake: (() => void) | undefined;
    let done = false;
    const listener: Listener = (d) => {
      queue.push(d);
      wake?.();
    };
    let set = this.listeners.get(executionId);
    if (!set) this.listeners.set(executionId, (set = new Set()));
    set.add(listener);
    const stop = () => {
      done = true;
      const mine = this.listeners.get(executionId);
      mine?.delete(listener);
      if (mine?.size === 0) this.listeners.delete(executionId);
      wake?.();
    };
    void ended.then(stop, stop);
    // D2: a refused subscriber, or one with nothing to watch, is stopped and its queue dropped.
    const refuse = () => {
      stop();
      queue.length = 0;
    };
    const authorized = allowed.then(
      (ok) => {
        if (!ok) refuse();
      },
      (e: unknown) => {
        refuse();
        throw e;
      },
    );
    authorized.catch(() => undefined);
    const iterator: AsyncIterableIterator<LiveDelta> = {
      async next() {
        await authorized;
        for (;;) {
          const d = queue.shift();
          if (d) return { value: d, done: false };
          if (done) return { value: undefined, done: true };
          await new Promise<void>((r) => (wake = r));
          wake = undefined;
        }
      },
      async return() {
        stop();
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }
}
