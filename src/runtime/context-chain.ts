/**
 * The chain syscalls of the flow context (ADR 0109, ADR 0110): `ctx.receive` takes the chain
 * inbox's next message (inbox.ts N1..N4), `ctx.continueAsNew` ends the generation
 * (continuation.ts K1..K6). Made per scope from its Scope (syscalls-scope.ts) by `makeContext`,
 * which owns R6/R7 through `call`.
 */
import { checkedSchema, validated, type StandardSchemaV1 } from "../kernel/schema.ts";
import {
  ContinueAsNewScopeOpenError,
  ContinueAsNewUnavailableError,
  ContinueAsNewWaitOutstandingError,
  InvalidInputError,
  SuspendTimeoutError,
} from "../kernel/errors.ts";
import { successorIdOf } from "../kernel/chain.ts";
import { MAX_ID_LENGTH } from "../kernel/ids.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { checkedTaintSource, taint } from "../kernel/taint.ts";
import { RECEIVE } from "../fold/fold.ts";
import { callFrame } from "../fold/settled.ts";
import { chainOf } from "../fold/state.ts";
import type { InboxMessage } from "../store/spi.ts";
import type { FlowContext, ReceiveOptions } from "./contract.ts";
import { checkedName, consumeSpecs, cursorOf, DEFAULT_TOPIC } from "./inbox.ts";
import { halted, type Run } from "./run.ts";
import { own, type Scope } from "./syscalls-scope.ts";

export function chainSyscalls(s: Scope): Pick<FlowContext, "receive" | "continueAsNew"> {
  const { run, deps, scope, call } = s;
  return {
    async receive<T>(options: ReceiveOptions<T> = {}): Promise<T> {
      if (options === null || typeof options !== "object") {
        throw new InvalidInputError("receive options must be an object");
      }
      const schema =
        options.schema === undefined ? undefined : checkedSchema(options.schema, "receive schema");
      const topic = checkedName(options.topic, "receive topic", DEFAULT_TOPIC);
      const source =
        options.taint === undefined
          ? undefined
          : checkedTaintSource(options.taint, "receive taint");
      const timeout = options.timeout;
      if (
        timeout !== undefined &&
        (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0)
      ) {
        throw new InvalidInputError(
          `receive timeout must be a finite number > 0, got ${String(timeout)}`,
        );
      }
      return call("receive", () => receiveNext<T>(s, topic, timeout, schema, source));
    },

    async continueAsNew(carry?: unknown): Promise<never> {
      const rotate = deps.rotate;
      if (!rotate) {
        throw new ContinueAsNewUnavailableError(
          "ctx.continueAsNew needs the continueAsNew feature: createRuntime({ features: { continueAsNew: true } }), or LOOM_FEATURES=continueAsNew for the loom command; turn it on once every process that shares the store runs a Loom that folds EXECUTION_CONTINUED (ADR 0109: the flag is the fleet-wide marker)",
        );
      }
      if (scope !== "") {
        throw new ContinueAsNewScopeOpenError(
          "ctx.continueAsNew was called from a ctx.parallel branch: continue from the flow body, after the branches returned",
        );
      }
      const json = boundedJson(carry, "carry of ctx.continueAsNew", deps.maxCarryBytes);
      // The successor runs this flow: its input schema checks the carry, before anything is
      // recorded (a refusal reaches the body, which may carry something else).
      const schema = run.flow.input;
      const next =
        schema === undefined
          ? json
          : boundedJson(
              await validated(
                schema,
                json,
                `the carry of ctx.continueAsNew (flow "${run.flow.name}")`,
              ),
              "carry of ctx.continueAsNew",
              deps.maxCarryBytes,
            );
      return call("continueAsNew", () => rotation(run, rotate, next));
    },
  };
}

/** `ctx.receive` inside its call: the next message of `topic`, consumed now or as recorded. */
async function receiveNext<T>(
  s: Scope,
  topic: string,
  timeout: number | undefined,
  schema: StandardSchemaV1<unknown, T> | undefined,
  source: string | undefined,
): Promise<T> {
  const { run, deps, scope } = s;
  const claim = run.claim(scope, "receive", RECEIVE);
  const callId = claim.callId;
  if (!claim.recorded) {
    const chainId = chainOf(run.state).chainId;
    let messages: InboxMessage[];
    try {
      messages = await deps.readInbox(chainId, topic, cursorOf(run.state, topic));
    } catch (e) {
      // A store that failed is not the flow's failure: the run stops without an outcome
      // (R6) and recovery re-drives it, as after a refused append.
      run.stop(e instanceof Error ? e : new Error(String(e)));
      return halted<T>();
    }
    // N3: what the messages mean is decided against the state as it is now.
    const specs = consumeSpecs(run.state, topic, messages, [{ callId, scope }]);
    if (!specs.some((x) => (x.payload as { callId?: string }).callId === callId)) {
      const wait: { [k: string]: Json } = { callId, scope, name: RECEIVE, topic };
      if (timeout !== undefined) wait.wakeAtMs = deps.now() + timeout;
      specs.push({ kind: "SUSPENDED", payload: wait });
    }
    const done = run.enqueue(specs);
    claim.take();
    await done;
  }
  if (run.state.frames[callId]?.status === "waiting") await run.waitFor(scope, callId);
  const frame = callFrame(run.state, callId);
  if (frame?.status === "timedOut") {
    throw new SuspendTimeoutError(
      `receive ${callId} of execution "${run.id}" got no message within ${timeout} ms`,
    );
  }
  const sent = own(frame?.output);
  const message =
    schema === undefined ? sent : await validated(schema, sent, `the message of receive ${callId}`);
  return (source === undefined ? message : taint(message, source)) as T;
}

/** `ctx.continueAsNew` inside its call: ends this generation, handing `next` to its successor. */
async function rotation(
  run: Run,
  rotate: (run: Run, carry: Json | undefined) => void,
  next: Json | undefined,
): Promise<never> {
  // A step still running is awaited by the rotation (quiesced), never refused (fix round
  // 1 (5)); a wait or an open branch is a park, not a rotation point. The scope comes first:
  // a wait inside an open branch is that branch's.
  if (run.openBranches() > 0) {
    throw new ContinueAsNewScopeOpenError(
      "ctx.continueAsNew was called with a ctx.parallel branch outstanding: a generation ends only when nothing of it is pending",
    );
  }
  if (run.state.openWaits > 0) {
    throw new ContinueAsNewWaitOutstandingError(
      "ctx.continueAsNew was called with a wait outstanding (a receive, sleep or suspend not yet answered): a generation ends only when nothing of it is pending",
    );
  }
  const chain = chainOf(run.state);
  const successor = successorIdOf(chain.chainId, chain.generation + 1);
  if (successor.length > MAX_ID_LENGTH) {
    throw new InvalidInputError(
      `ctx.continueAsNew: the successor id "${successor}" would be over ${MAX_ID_LENGTH} characters; start the chain under a shorter id`,
    );
  }
  run.rotating = true;
  rotate(run, next);
  return halted<never>();
}
