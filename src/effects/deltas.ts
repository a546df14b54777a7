/**
 * Live deltas (issue 6): the text of a running LLM step as it streams, for the caller in the same
 * process, without journaling each delta (the step records only its final result).
 *
 * The effect publishes; `runtime.deltas(id)` (and `handle.deltas()`) subscribes. A subscriber sees
 * what arrives after it subscribed; when it falls behind, deltas wait in its queue. Nothing here
 * is durable: after a crash or in another process there is only the log.
 */
export interface LiveDelta {
  stepId: string;
  text: string;
}

type Listener = (delta: LiveDelta) => void;

const listeners = new Map<string, Set<Listener>>();

/** Called by LLM effects after every text delta of a stream. */
export function publishDelta(executionId: string, delta: LiveDelta): void {
  const set = listeners.get(executionId);
  if (set) for (const l of set) l(delta);
}

/** The deltas of `executionId` from now on, until `ended` resolves or the loop is left. */
export function subscribeDeltas(
  executionId: string,
  ended: Promise<unknown>,
): AsyncIterableIterator<LiveDelta> {
  const queue: LiveDelta[] = [];
  let wake: (() => void) | undefined;
  let done = false;
  const listener: Listener = (d) => {
    queue.push(d);
    wake?.();
  };
  let set = listeners.get(executionId);
  if (!set) listeners.set(executionId, (set = new Set()));
  set.add(listener);
  const stop = () => {
    done = true;
    listeners.get(executionId)?.delete(listener);
    wake?.();
  };
  void ended.then(stop, stop);
  const iterator: AsyncIterableIterator<LiveDelta> = {
    async next() {
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
