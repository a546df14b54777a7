/**
 * A database where executions wait, for the tests of what shows it (`loom ls`, the dashboard;
 * issue 26 item 4). Queue fc (one at a time, one per key) held a slot 12 s once (a moved clock),
 * `run-2` (u1) holds it now, and three wait: q-5 (u1, priority -1), q-3 (u1), q-4 (u2), so their
 * positions are 1, 2, 3 and their expected waits ~12 s, ~24 s, ~36 s. On limiter m (100 output
 * tokens a minute) `ask-a` holds 60 and `ask-b` waits for its 60: position 1, ~12 s.
 */
import { createRuntime, flow$, type Effect, type Runtime, type Store } from "../../src/index.ts";
import { offsetClock, until } from "../helpers.ts";

export const QUEUES = { fc: { concurrency: 1, keyConcurrency: 1 } };
export const RATE_LIMITS = { m: { outputTpm: 100 } };

export interface Waiting {
  runtime: Runtime;
  /** Lets every held body and call finish, then closes the runtime. */
  close(): Promise<void>;
}

export async function waitingExecutions(store: Store): Promise<Waiting> {
  const gates = new Map<string, () => void>();
  const hold = (id: string) => new Promise<void>((resolve) => gates.set(id, resolve));
  const work = flow$(
    "fc-work",
    async (ctx, input: { id: string; user: string }) => ctx.run("work", () => hold(input.id)),
    { queue: { name: "fc", key: (i: { user: string }) => i.user } },
  );
  const model: Effect<{ id: string }, string> = {
    name: "model",
    limiter: () => ({ name: "m", inputTokens: 0, outputTokens: 60 }),
    async run(c, ectx) {
      await hold(c.id);
      ectx.meter({ tokens: { input: 0, output: 60 } });
      return c.id;
    },
  };
  const ask = flow$("fc-ask", async (ctx, c: { id: string }) =>
    ctx.execute(model, c, { retry: false }),
  );
  const clock = offsetClock();
  const r = createRuntime({
    store,
    clock,
    pollIntervalMs: 20,
    queues: QUEUES,
    rateLimits: RATE_LIMITS,
  });
  r.registerFlow(work).registerFlow(ask);
  const done = await r.start(work, { id: "done-1", user: "u0" }, { id: "done-1" });
  await until(() => gates.has("done-1"));
  clock.advance(12_000);
  gates.get("done-1")?.();
  await done.result();
  await r.start(work, { id: "run-2", user: "u1" }, { id: "run-2" });
  await until(() => gates.has("run-2"));
  await r.start(work, { id: "q-3", user: "u1" }, { id: "q-3" });
  await r.start(work, { id: "q-4", user: "u2" }, { id: "q-4" });
  await r.start(work, { id: "q-5", user: "u1" }, { id: "q-5", priority: -1 });
  await r.start(ask, { id: "ask-a" }, { id: "ask-a" });
  await until(() => gates.has("ask-a"));
  await r.start(ask, { id: "ask-b" }, { id: "ask-b" });
  await until(async () => (await r.limiters())[0]?.waiting.length === 1);
  return {
    runtime: r,
    async close() {
      for (const go of gates.values()) go();
      await r.close();
    },
  };
}
