/**
 * Debounced starts (issue 26 item 3): `start(flow, input, { debounce: { key, ms, maxMs } })`
 * with a queue (the start's or the flow's). The starts of one key within `ms` of each other make
 * one execution, which runs with the last input.
 *
 * Invariants (tests cite DB1..DB4):
 * DB1. The first start of a key records a queued execution whose dedupe key (store S27) is
 *      `debounce:` and the JSON of [flow, principal, subject, key], and whose `notBeforeMs` is
 *      now + ms: it is not admitted before then (S26). A key is its flow's, its principal's and its
 *      subject's: starts of one key by another flow, principal or subject make executions of
 *      their own. (A bare `debounce:<key>`, one per queue, let a start of another flow or another
 *      principal replace the input of the execution it found: a body ran with another flow's
 *      input, and a principal wrote into another's execution.)
 * DB2. A start of the key while that execution is still queued appends START_DEBOUNCED to it
 *      (its own input; `notBeforeMs` = the earlier of now + ms and the first start + maxMs) and
 *      answers its id: the last input wins. It appends under the execution's lease, which
 *      admission takes (S26), so never to one already admitted, and only to an execution of its
 *      own flow, principal and subject (ExecutionConflictError otherwise: not reachable while
 *      DB5 holds).
 * DB3. A start that finds the execution admitted or ended meanwhile starts a new one (DB1): no
 *      start is lost, and none joins an execution whose body already read its input.
 * DB4. The options are checked before anything is recorded (InvalidInputError): `ms` and `maxMs`
 *      are whole milliseconds up to MAX_WINDOW_MS. (A fractional or huge one reached the store,
 *      whose refusal named neither the option nor the start.)
 * DB5. A start's own `dedupe` may not begin with `debounce:` (queue-options.ts): that prefix is
 *      the debounce's, so no execution started with a dedupe key has its input replaced.
 */
import {
  ExecutionConflictError,
  InvalidInputError,
  isLoomError,
  LeaseHeldError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { QueueMark } from "../kernel/queue.ts";
import type { DebounceOptions } from "./contract.ts";
import type { Flow } from "./flow.ts";
import { DEBOUNCE_PREFIX } from "./queue-options.ts";
import { create, deliver } from "./runtime-core.ts";
import type { RuntimeState } from "./runtime-state.ts";
import { delay } from "./system.ts";

const TRIES = 50;
/** DB4: the longest debounce window (2^40 ms, about 35 years). */
const MAX_WINDOW_MS = 2 ** 40;

/** Whose a debounced start is (DB1): its key counts within these. */
export interface DebounceScope {
  principal: string | undefined;
  subject: string | undefined;
}

/** DB1..DB3: the id of the execution this start made or joined. */
export async function debouncedStart(
  s: RuntimeState,
  flow: Flow,
  id: string,
  mark: QueueMark,
  payloadFor: (mark: QueueMark) => { [k: string]: Json },
  options: DebounceOptions,
  input: Json | undefined,
  scope: DebounceScope,
): Promise<string> {
  const d = checkedDebounce(options);
  const dedupe = `${DEBOUNCE_PREFIX}${JSON.stringify([
    flow.name,
    scope.principal ?? null,
    scope.subject ?? null,
    d.key,
  ])}`;
  for (let tries = 0; tries < TRIES; tries++) {
    const now = s.clock.now();
    const first: QueueMark = { ...mark, dedupe, notBeforeMs: now + d.ms };
    try {
      await s.tasks.exclusive(id, () =>
        create(s, flow, id, payloadFor(first), refuseRepeat(id), [], false),
      );
      s.loop?.within(d.ms);
      return id;
    } catch (e) {
      if (!isLoomError(e, "LOOM_QUEUE_DUPLICATE")) throw e;
      const existing = existingIdOf(e.details);
      const joining = { flow: flow.name, dedupe, ...scope };
      if (existing !== undefined && (await join(s, existing, joining, d, input, now))) {
        return existing;
      }
    }
    // DB3: it was admitted or held by another start between the two tries.
    await delay(Math.min(5 * (tries + 1), 50));
  }
  throw new LeaseHeldError(
    `the debounced start of key ${JSON.stringify(d.key)} found its execution busy ${TRIES} times; try again`,
  );
}

/** DB2: START_DEBOUNCED on `existing` while it is queued under `dedupe`; false when it is not. */
async function join(
  s: RuntimeState,
  existing: string,
  joining: DebounceScope & { flow: string; dedupe: string },
  d: Required<Pick<DebounceOptions, "ms">> & DebounceOptions,
  input: Json | undefined,
  now: number,
): Promise<boolean> {
  let joined = false;
  let notBefore = now + d.ms;
  const delivered = await s.tasks.exclusive(existing, () =>
    deliver(
      s,
      existing,
      (state) => {
        if (state.status !== "queued" || state._queue?.dedupe !== joining.dedupe) return undefined;
        if (
          state.flow !== joining.flow ||
          state._principal !== joining.principal ||
          state._subject !== joining.subject
        ) {
          throw new ExecutionConflictError(
            `a debounced start of flow "${joining.flow}" found execution "${existing}" under its key, of another flow, principal or subject`,
            { executionId: existing },
          );
        }
        if (d.maxMs !== undefined) notBefore = Math.min(notBefore, state.startedAt + d.maxMs);
        joined = true;
        const payload: { [k: string]: Json } = { notBeforeMs: notBefore };
        if (input !== undefined) payload.input = input;
        return [{ kind: "START_DEBOUNCED", payload, kernel: true }];
      },
      false,
    ),
  );
  if (delivered && joined) s.loop?.within(Math.max(0, notBefore - s.clock.now()));
  return delivered && joined;
}

function refuseRepeat(id: string) {
  return (): void => {
    throw new InvalidInputError(`a debounced start makes its own id; "${id}" is taken`);
  };
}

function existingIdOf(details: unknown): string | undefined {
  if (details === null || typeof details !== "object") return undefined;
  const id = (details as { existingId?: unknown }).existingId;
  return typeof id === "string" ? id : undefined;
}

/** DB4 */
function checkedDebounce(value: DebounceOptions): DebounceOptions {
  if (value === null || typeof value !== "object") {
    throw new InvalidInputError("start option debounce must be { key, ms, maxMs? }");
  }
  if (typeof value.key !== "string" || value.key.length === 0 || value.key.length > 400) {
    throw new InvalidInputError("debounce key must be a string of 1 to 400 characters");
  }
  // A window past MAX_WINDOW_MS would put its time past what a store keeps (a safe integer).
  const ms = value.ms;
  if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0 || ms > MAX_WINDOW_MS) {
    throw new InvalidInputError(
      `debounce ms must be a whole number of milliseconds from 0 to ${MAX_WINDOW_MS}, got ${String(ms)}`,
    );
  }
  const out: DebounceOptions = { key: value.key, ms };
  if (value.maxMs !== undefined) {
    const max = value.maxMs;
    if (typeof max !== "number" || !Number.isSafeInteger(max) || max < ms || max > MAX_WINDOW_MS) {
      throw new InvalidInputError(
        `debounce maxMs must be a whole number of milliseconds from ms to ${MAX_WINDOW_MS}, got ${String(max)}`,
      );
    }
    out.maxMs = max;
  }
  return out;
}
