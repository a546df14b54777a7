/**
 * SIGINT and SIGTERM as a promise, so a long-running command can close its runtime gracefully.
 *
 * While a watch is open it keeps the process alive: the runtime's own timers are unref'd, so a
 * command waiting on a parked execution (or a worker with nothing to do) would otherwise just
 * exit. A second signal while closing exits at once (code 130), for a close that hangs.
 */
export interface SignalWatch {
  readonly received: Promise<NodeJS.Signals>;
  dispose(): void;
}

export function watchSignals(): SignalWatch {
  let count = 0;
  let resolveReceived!: (signal: NodeJS.Signals) => void;
  const received = new Promise<NodeJS.Signals>((r) => (resolveReceived = r));
  const onSignal = (signal: NodeJS.Signals): void => {
    count++;
    if (count > 1) process.exit(130);
    resolveReceived(signal);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const keepAlive = setInterval(() => undefined, 1 << 30);
  return {
    received,
    dispose() {
      clearInterval(keepAlive);
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}
