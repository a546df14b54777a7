/**
 * Red-team regressions for flow control (issue 26) on PostgreSQL, where S27's dedupe is a unique
 * index and keys are UTF-8 text: a fork of a queued execution started with a dedupe key waits in
 * the queue (runtime/fork.ts V8); a queued execution cancelled while an admitter that died holds
 * its lease gives its slot back at once and never runs (queues.ts QU2, QU3); keys that UTF-8
 * cannot keep apart are refused before anything is recorded (QU4).
 */
import { afterAll, describe, expect, it } from "vitest";
import { flow$ } from "../src/index.ts";
import { isLoomError } from "../src/kernel/errors.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { runtimes, until } from "./helpers.ts";

const url = pgUrl();
const schemas: string[] = [];
afterAll(() => dropSchema(url, ...schemas));

async function open() {
  const schema = schemaName("redteam_fc");
  schemas.push(schema);
  return postgresStore({ connectionString: url, schema });
}

describe("flow-control attacks on PostgreSQL", () => {
  const rt = runtimes();

  it("V8, QU2, QU3, QU4: a deduped fork waits; a cancel of an admitted-unrecorded execution frees its slot; odd keys", async () => {
    const store = await open();
    const ran: string[] = [];
    const f = flow$(
      "rt-pg",
      async (ctx, n: number) => {
        await ctx.run("see", () => ran.push(ctx.executionId));
        return n;
      },
      { queue: "q" },
    );
    const r = rt(store, { background: false }).registerFlow(f);
    await r.start(f, 1, { id: "orig", dedupe: "job" });
    await r.fork("orig", 0, "forked");
    expect((await r.getState("forked")).status).toBe("queued");
    for (const key of ["\ud800", "\udc00"]) {
      const refused = await r.start(f, 2, { key }).catch((e: unknown) => e);
      expect(isLoomError(refused, "LOOM_INVALID_INPUT")).toBe(true);
    }
    // An admitter that took "doomed"'s lease and died before its EXECUTION_ADMITTED.
    await r.start(f, 3, { id: "doomed", queue: "solo" });
    const taken = await store.admitQueued("dead-owner", {
      queue: "solo",
      limits: { concurrency: 1 },
      flows: ["rt-pg"],
      limit: 1,
      ttlMs: 600_000,
      nowMs: Date.now(),
    });
    expect(taken.map((t) => t.executionId)).toEqual(["doomed"]);
    expect(await r.cancel("doomed", "not needed")).toBe(true);
    expect((await store.queueView("solo", { nowMs: Date.now(), limit: 5 })).active).toBe(0);
    await r.start(f, 4, { id: "next", queue: "solo" });
    rt(store, { queues: { solo: { concurrency: 1 }, q: { concurrency: 1 } } }).registerFlow(f);
    await until(() => ["next", "orig", "forked"].every((id) => ran.includes(id)), 10_000);
    expect(ran).not.toContain("doomed");
    expect((await store.read("doomed")).map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "EXECUTION_CANCELLED",
    ]);
  });
  it("L1: a member made with a fractional maxActive claims whole numbers of executions", async () => {
    const store = await open();
    const f = flow$("rt-room-pg", async (_ctx, n: number) => n);
    const client = rt(store, { background: false }).registerFlow(f);
    for (let i = 0; i < 3; i++) await client.start(f, i, { id: `room-${i}`, drive: false });
    const errors: Error[] = [];
    // Before, a claim asked the store for LIMIT 2.5 (or 0.5) rows, and PostgreSQL refused it.
    rt(store, { maxActive: 2.5, pollIntervalMs: 20, onError: (e) => errors.push(e) }).registerFlow(
      f,
    );
    for (let i = 0; i < 3; i++) {
      await until(async () => (await client.getState(`room-${i}`)).status === "completed");
    }
    expect(errors).toEqual([]);
  });
});
