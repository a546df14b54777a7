/**
 * Waits and time: `ctx.sleep` and `ctx.sleepUntil` (a timer), `ctx.suspend` (a wait for a
 * resume, with an optional timeout), and `ctx.now`, the time as a recorded decision.
 *
 * Invariants kept here:
 * - R1 (run.ts): a wait is registered in the log (TIMER_SCHEDULED, SUSPENDED) before the body
 *   blocks on it, and released only once the event that settled it committed.
 * - R6 (run.ts): `ctx.now` of a stopped run records nothing; the body halts at its next awaited
 *   call.
 * - Time is an input (STYLE 2): a wake time is taken from the runtime clock and written into the
 *   event; `ctx.now` replays the time it recorded.
 */
import { InvalidInputError, SuspendTimeoutError } from "../kernel/errors.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import { callFrame, keptValue } from "../fold/settled.ts";
import { checkedSchema, validated } from "../kernel/schema.ts";
import type { FlowContext, SuspendOptions } from "./contract.ts";
import { own, record, type Scope } from "./syscalls-scope.ts";

/** The name the kernel records `ctx.now` under; a user's decision may not start with "$". */
const NOW = "$now";

export function waitSyscalls(
  s: Scope,
): Pick<FlowContext, "sleep" | "sleepUntil" | "suspend" | "now"> {
  const { run, deps, scope, call } = s;
  return {
    async sleep(ms) {
      if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
        throw new InvalidInputError(
          `sleep needs a finite number of milliseconds >= 0, got ${String(ms)}`,
        );
      }
      return call("sleep", async () => void (await wait(s, "sleep", deps.now() + ms)));
    },

    async sleepUntil(epochMs) {
      if (typeof epochMs !== "number" || !Number.isFinite(epochMs)) {
        throw new InvalidInputError(
          `sleepUntil needs a finite epoch-ms time, got ${String(epochMs)}`,
        );
      }
      return call("sleep", async () => void (await wait(s, "sleep", epochMs)));
    },

    async suspend<T>(options: SuspendOptions<T> = {}): Promise<T> {
      const timeout = options.timeout;
      const schema =
        options.schema === undefined ? undefined : checkedSchema(options.schema, "suspend schema");
      if (
        timeout !== undefined &&
        (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0)
      ) {
        throw new InvalidInputError(
          `suspend timeout must be a finite number > 0, got ${String(timeout)}`,
        );
      }
      return call<T>("suspend", async () => {
        const callId = await wait(
          s,
          "suspend",
          timeout === undefined ? undefined : deps.now() + timeout,
        );
        // A suspend kept by its value alone was resumed (fold/settled.ts L2).
        const kept = keptValue(run.state, "suspend", callId);
        const frame = kept === undefined ? callFrame(run.state, callId) : undefined;
        if (frame?.status === "timedOut") {
          throw new SuspendTimeoutError(
            `suspend ${callId} of execution "${run.id}" timed out after ${timeout} ms`,
          );
        }
        const payload = own(kept !== undefined ? kept : frame?.output);
        return schema === undefined
          ? (payload as T)
          : validated(schema, payload, `the resume payload of suspend ${callId}`);
      });
    },

    now() {
      // A stopped run does not record: the body halts at its next awaited call (R6).
      if (!run.active || isTerminalStatus(run.state.status)) return deps.now();
      run.begin(scope, "now");
      try {
        const t = deps.now();
        return record(s, NOW, t) as number;
      } finally {
        run.end(scope);
      }
    },
  };
}

/** Registers (or finds) a wait and resolves with its call id once it is settled. */
async function wait(
  s: Scope,
  kind: "sleep" | "suspend",
  wakeAtMs: number | undefined,
): Promise<string> {
  const { run, scope } = s;
  const claim = run.claim(scope, kind, kind);
  if (!claim.recorded) {
    const payload: { [k: string]: Json } = { callId: claim.callId, scope, name: kind };
    if (wakeAtMs !== undefined) payload.wakeAtMs = wakeAtMs;
    const done = run.enqueue([
      { kind: kind === "sleep" ? "TIMER_SCHEDULED" : "SUSPENDED", payload },
    ]);
    claim.take();
    await done;
  }
  await run.waitFor(scope, claim.callId);
  return claim.callId;
}
