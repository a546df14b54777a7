/**
 * A parent process for the orphan test: runs the `waits` isolated effect and never returns, so
 * the test can SIGKILL this process and check that the child does not outlive it.
 */
import { waits } from "./isolated-effects.ts";

const pidFile = process.argv[2] ?? "";
await waits.run(pidFile, {
  executionId: "orphan",
  stepId: "waits#0",
  attempt: 1,
  idempotencyKey: "orphan/waits#0",
  signal: new AbortController().signal,
  resources: {},
  meter: () => undefined,
});
