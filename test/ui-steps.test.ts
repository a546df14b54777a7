/**
 * The dashboard's step detail, lineage and applicable actions, fork, rerun and flows (issue 25
 * item 2, 3), over real runtimes and real HTTP with the token: ui/call.ts J1..J3,
 * ui/applicable.ts Y1..Y3, ui/made.ts M1..M4, detail.ts D4, routes.ts P2.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  aesGcmCodec,
  createRuntime,
  flow$,
  memoryStore,
  step$,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { startUiServer } from "../src/ui/server.ts";
import type {
  ListAnswer,
  ExecutionDetail,
  FlowsAnswer,
  MadeExecution,
  Projection,
  StepDetail,
} from "../src/ui/api-types.ts";
import type { ErrorBody } from "../src/ui/http.ts";
import { until } from "./helpers.ts";

const SECRET = "card 4111-1111-1111-1111";
const fast = { initialDelayMs: 5, maxDelayMs: 20 };

const flaky = step$("flaky", async (q: string, ectx) => {
  ectx.meter({ tokens: { input: 10, output: 1 } });
  if (ectx.attempt < 2) throw new Error("overloaded");
  return `answer to ${q}`;
});
const asks = flow$("asks", async (ctx, input: { q: string }) =>
  ctx.execute(flaky, input.q, { retry: fast }),
);
const parks = flow$("parks", async (ctx) => {
  const got = await ctx.suspend<{ go: string }>({ timeout: 3_600_000 });
  return ctx.run("after", async () => got);
});
let release = () => {};
const busy = flow$("busy", async (ctx) => {
  await ctx.run("waits", () => new Promise<void>((resolve) => (release = resolve)));
  return "done";
});
const typed = flow$("typed", async (ctx, input) => ctx.run("echo", async () => input.n * 2), {
  input: z.object({ n: z.number() }),
});
const pays = flow$("pays", async (ctx, input: { card: string }) =>
  ctx.run("pay", async () => `paid with ${input.card}`),
);

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
});

interface Served {
  runtime: Runtime;
  url: string;
  token: string;
}

async function serve(
  opts: { store?: Store; readOnly?: boolean; runtime?: Partial<RuntimeOptions> } = {},
): Promise<Served> {
  const runtime = createRuntime({
    store: opts.store ?? memoryStore(),
    closeStore: false,
    pollIntervalMs: 20,
    ...opts.runtime,
  });
  runtime.registerFlow(asks).registerFlow(parks).registerFlow(busy).registerFlow(typed);
  const ui = await startUiServer({ runtime, port: 0, readOnly: opts.readOnly ?? false });
  open.push(async () => {
    await ui.close();
    await runtime.close();
  });
  return { runtime, url: ui.url, token: ui.token };
}

type Answer<T> = { status: number; body: T & { error: ErrorBody }; text: string };

async function call<T>(s: Served, path: string, body?: unknown): Promise<Answer<T>> {
  const res = await fetch(`${s.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Answer<T>["body"], text };
}

const callPath = (id: string, callId: string) =>
  `/api/executions/${encodeURIComponent(id)}/call?call=${encodeURIComponent(callId)}`;

describe("GET /api/executions/:id/call (ui/call.ts)", () => {
  for (const kind of ["memory", "sqlite"] as const) {
    it(`J1, J2: a retried step in full; 400 without a call, 404 for an unknown call or execution (${kind})`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "loom-ui-steps-"));
      open.push(async () => rmSync(dir, { recursive: true, force: true }));
      const store = kind === "memory" ? memoryStore() : sqliteStore(join(dir, "ui.db"));
      if (kind === "sqlite") open.push(() => store.close());
      const s = await serve({ store });
      await (await s.runtime.start(asks, { q: "tides" }, { id: "a/1" })).result();
      const got = await call<StepDetail>(s, callPath("a/1", "flaky#0"));
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({
        callId: "flaky#0",
        kind: "step",
        status: "completed",
        input: "tides",
        output: "answer to tides",
        sealed: false,
        metering: { tokens: { input: 20, output: 2 } },
      });
      expect(got.body.attempts.map((a) => a.error?.message)).toEqual(["overloaded", undefined]);
      expect(got.body.forkAt).toBe((got.body.seqs[0] ?? 0) - 1);
      const none = await call(s, `/api/executions/a%2F1/call`);
      expect([none.status, none.body.error.code]).toEqual([400, "LOOM_INVALID_INPUT"]);
      const unknown = await call(s, callPath("a/1", "nothing#0"));
      expect([unknown.status, unknown.body.error.code]).toEqual([404, "LOOM_NOT_FOUND"]);
      const noExecution = await call(s, callPath("nobody", "flaky#0"));
      expect(noExecution.status).toBe(404);
    });
  }

  it("J3: a sealed call without the key says sealed and shows nothing of it; with the key it shows the content", async () => {
    const store = memoryStore();
    const codec = aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" });
    const writer = createRuntime({ store, codec, closeStore: false });
    writer.registerFlow(pays);
    open.push(() => writer.close());
    await (await writer.start(pays, { card: SECRET }, { id: "pay-1" })).result();
    const keyless = await serve({ store });
    const sealed = await call<StepDetail>(keyless, callPath("pay-1", "pay#0"));
    expect(sealed.status).toBe(200);
    expect(sealed.body).toMatchObject({ callId: "pay#0", name: "pay", sealed: true, seqs: [] });
    expect(sealed.body.status).toBe("sealed");
    expect(sealed.body.input).toBeUndefined();
    expect(sealed.text).not.toContain("4111");
    expect(sealed.text).not.toContain("paid");
    const missing = await call(keyless, callPath("nobody", "pay#0"));
    expect(missing.status).toBe(404);
    const keyed = await serve({ store, runtime: { codec } });
    const shown = await call<StepDetail>(keyed, callPath("pay-1", "pay#0"));
    expect(shown.body.sealed).toBe(false);
    expect(shown.body.output).toBe(`paid with ${SECRET}`);
  });
});

describe("lineage and applicable actions (detail.ts D4, ui/applicable.ts)", () => {
  it("Y2: resume only while parked at an open suspend, never inside a step; cancel and send until the end; fork from a whole log; rerun for a registered flow", async () => {
    const s = await serve();
    const actions = async (id: string) =>
      (await call<ExecutionDetail>(s, `/api/executions/${id}`)).body.actions;
    await s.runtime.start(busy, null, { id: "busy-1" });
    await until(async () => (await s.runtime.getState("busy-1")).inFlight === 1);
    expect(await actions("busy-1")).toEqual({
      cancel: true,
      resume: false,
      send: true,
      fork: true,
      rerun: true,
    });
    release();
    // A suspend waits in one branch while a step runs in the other: still inside a step.
    const both = flow$("both", async (ctx) =>
      ctx.parallel([
        async (c) => c.suspend<string>({ timeout: 3_600_000 }),
        async (c) => c.run("waits", () => new Promise<string>((r) => (release = () => r("x")))),
      ]),
    );
    s.runtime.registerFlow(both);
    await s.runtime.start(both, null, { id: "both-1" });
    await until(async () => {
      const st = await s.runtime.getState("both-1");
      return st.inFlight === 1 && st._openSuspends.length === 1;
    });
    expect((await actions("both-1")).resume).toBe(false);
    release();
    await until(async () => (await s.runtime.getState("both-1")).status === "parked");
    expect((await actions("both-1")).resume).toBe(true);
    await s.runtime.start(parks, null, { id: "parks-1" });
    await until(async () => (await s.runtime.getState("parks-1")).status === "parked");
    expect((await actions("parks-1")).resume).toBe(true);
    await s.runtime.resume("parks-1", { go: "now" });
    await until(async () => (await s.runtime.getState("parks-1")).status === "completed");
    expect(await actions("parks-1")).toEqual({
      cancel: false,
      resume: false,
      send: false,
      fork: true,
      rerun: true,
    });
    // A flow this dashboard's runtime does not have: no rerun.
    const other = flow$("other", async () => 1);
    s.runtime.registerFlow(other);
    await (await s.runtime.start(other, null, { id: "other-1" })).result();
    const bare = createRuntime({ store: s.runtime.store, background: false });
    open.push(() => bare.close());
    const ui = await startUiServer({ runtime: bare, port: 0 });
    open.push(() => ui.close());
    const seen = await call<ExecutionDetail>(
      { runtime: bare, url: ui.url, token: ui.token },
      "/api/executions/other-1",
    );
    expect(seen.body.actions.rerun).toBe(false);
    expect(seen.body.lineage).toEqual({ forks: [] });
  });

  it("Y3: a continued execution takes a send while its chain's head runs, and not once the head ended", async () => {
    const hops = flow$("hops", async (ctx, gen: number | null) => {
      if ((gen ?? 0) === 0) return ctx.continueAsNew(1);
      return ctx.receive<string>();
    });
    const s = await serve({ runtime: { features: { continueAsNew: true } } });
    s.runtime.registerFlow(hops);
    await s.runtime.start(hops, null, { id: "hop" });
    await until(
      async () => (await s.runtime.getState("hop~1").catch(() => null))?.status === "parked",
    );
    const actions = async () =>
      (await call<ExecutionDetail>(s, "/api/executions/hop")).body.actions;
    expect((await s.runtime.getState("hop")).status).toBe("continued");
    expect(await actions()).toMatchObject({ cancel: false, resume: false, send: true });
    await s.runtime.cancel("hop~1");
    expect(await actions()).toMatchObject({ cancel: false, send: false });
    const lineage = (await call<ExecutionDetail>(s, "/api/executions/hop")).body.lineage;
    expect(lineage.continuedTo).toBe("hop~1");
  });

  it("Y1, D4: a read-only server applies no action; the live stream carries lineage and actions", async () => {
    const s = await serve({ readOnly: true });
    await s.runtime.start(parks, null, { id: "ro-1" });
    await until(async () => (await s.runtime.getState("ro-1")).status === "parked");
    const detail = await call<ExecutionDetail>(s, "/api/executions/ro-1");
    expect(Object.values(detail.body.actions)).toEqual([false, false, false, false, false]);
    const res = await fetch(`${s.url}/api/executions/ro-1/live?from=0`, {
      headers: { authorization: `Bearer ${s.token}` },
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const update$ = /event: update\nid: \d+\ndata: (.*)\n\n/;
    let text = "";
    while (!update$.test(text)) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += new TextDecoder().decode(chunk.value);
    }
    await reader.cancel();
    const data = update$.exec(text)?.[1] ?? "{}";
    const update = JSON.parse(data) as Projection;
    expect(update.lineage).toEqual({ forks: [] });
    expect(update.actions.resume).toBe(false);
  });
});

describe("POST fork and rerun, GET /api/flows (ui/made.ts)", () => {
  it("M1, M4: a fork at a step's forkAt runs it again; its clock and budget come back; bad bodies are 400 with nothing written", async () => {
    const s = await serve();
    await (
      await s.runtime.start(asks, { q: "tides" }, { id: "src-1", budget: { tokens: 1000 } })
    ).result();
    const step = (await call<StepDetail>(s, callPath("src-1", "flaky#0"))).body;
    const before = (await s.runtime.list()).length;
    for (const bad of [
      {},
      { atSequence: -1 },
      { atSequence: "1" },
      { atSequence: 1.5 },
      { atSequence: 1, extra: true },
      { atSequence: 1, budget: 5 },
      { atSequence: 1, keepDeadline: "yes" },
      { atSequence: 1, newId: 7 },
      { atSequence: 1, budget: { tokens: 5000 } }, // raises the origin's limit (fork.ts V6)
      { atSequence: 1, budget: { token: 10 } }, // a misspelled dimension
      { atSequence: 1, newId: "bad id with spaces" },
      { atSequence: 999 }, // past the log's end: the runtime's refusal (fork.ts V4)
    ]) {
      const refused = await call(s, "/api/executions/src-1/fork", bad);
      expect(refused.status, JSON.stringify(bad)).toBe(400);
    }
    expect((await call(s, "/api/executions/src-1/fork", [1])).status).toBe(400);
    expect((await s.runtime.list()).length).toBe(before);
    const made = await call<MadeExecution>(s, "/api/executions/src-1/fork", {
      atSequence: step.forkAt,
      newId: "src-1-fork",
      budget: { tokens: 500 },
    });
    expect(made.status).toBe(200);
    const origin = await s.runtime.getState("src-1");
    expect(made.body).toMatchObject({ executionId: "src-1-fork", budget: { tokens: 500 } });
    expect(made.body.startedAtMs).toBeGreaterThanOrEqual(origin.startedAt);
    expect(made.body.spent).toEqual({});
    const outcome = await s.runtime.handle("src-1-fork").result();
    expect(outcome.output).toBe("answer to tides");
    const redo = (await call<StepDetail>(s, callPath("src-1-fork", "flaky#0"))).body;
    expect(redo.attempts).toHaveLength(2);
    expect(redo.metering.tokens).toEqual({ input: 20, output: 2 });
    const lineage = (await call<ExecutionDetail>(s, "/api/executions/src-1-fork")).body.lineage;
    expect(lineage.forkedFrom).toEqual({ executionId: "src-1", seq: step.forkAt });
    // An id already taken is the runtime's refusal, answered with its code.
    const again = await call(s, "/api/executions/src-1/fork", {
      atSequence: 0,
      newId: "src-1-fork",
    });
    expect([again.status, again.body.error.code]).toEqual([409, "LOOM_EXECUTION_CONFLICT"]);
  });

  it("M1, M2: a rerun starts the same flow with the same input, or a given one checked by the flow's schema before anything is written", async () => {
    const s = await serve();
    await (await s.runtime.start(typed, { n: 2 }, { id: "t-1" })).result();
    const same = await call<MadeExecution>(s, "/api/executions/t-1/rerun", { newId: "t-2" });
    expect(same.status).toBe(200);
    expect(same.body.executionId).toBe("t-2");
    expect((await s.runtime.handle("t-2").result()).output).toBe(4);
    const given = await call<MadeExecution>(s, "/api/executions/t-1/rerun", { input: { n: 5 } });
    expect(given.status).toBe(200);
    expect((await s.runtime.handle(given.body.executionId).result()).output).toBe(10);
    const before = (await s.runtime.list()).length;
    const refused = await call(s, "/api/executions/t-1/rerun", {
      input: { n: "five" },
      newId: "t-bad",
    });
    expect([refused.status, refused.body.error.code]).toEqual([400, "LOOM_INVALID_INPUT"]);
    for (const bad of [{ newId: 3 }, { inputs: {} }, "x"]) {
      expect((await call(s, "/api/executions/t-1/rerun", bad)).status).toBe(400);
    }
    expect((await s.runtime.list()).length).toBe(before);
    expect(await s.runtime.store.head("t-bad")).toBe(-1);
    // M2: the recorded budget goes with it.
    await (
      await s.runtime.start(asks, { q: "x" }, { id: "b-1", budget: { tokens: 900 } })
    ).result();
    const rerun = await call<MadeExecution>(s, "/api/executions/b-1/rerun", {});
    expect(rerun.body.budget).toEqual({ tokens: 900 });
  });

  it("M3: without the flow registered, 409 LOOM_UNKNOWN_FLOW naming --module; with it and no background loop, only recorded for a worker to drive", async () => {
    const store = memoryStore();
    // A worker whose recovery runs only when the test calls it: nothing drives w-2 before.
    const writer = createRuntime({ store, closeStore: false, background: false });
    writer.registerFlow(asks);
    open.push(() => writer.close());
    await (await writer.start(asks, { q: "a" }, { id: "w-1" })).result();
    const bare = await serve({ store, runtime: { background: false } });
    const flows = await call<FlowsAnswer>(bare, "/api/flows");
    expect(flows.body.flows.map((f) => f.name).sort()).toEqual(["asks", "busy", "parks", "typed"]);
    expect(flows.body.flows.find((f) => f.name === "typed")).toEqual({
      name: "typed",
      version: "1",
      hasInputSchema: true,
    });
    const recorded = await call<MadeExecution>(bare, "/api/executions/w-1/rerun", {
      newId: "w-2",
    });
    expect(recorded.status).toBe(200);
    expect((await bare.runtime.getState("w-2")).status).toBe("pending");
    expect(await writer.recoverAbandoned()).toContain("w-2");
    await until(async () => (await writer.getState("w-2")).status === "completed");
    // A dashboard whose runtime lacks the flow.
    const lacking = createRuntime({ store, closeStore: false, background: false });
    open.push(() => lacking.close());
    const ui = await startUiServer({ runtime: lacking, port: 0 });
    open.push(() => ui.close());
    const s = { runtime: lacking, url: ui.url, token: ui.token };
    const refused = await call(s, "/api/executions/w-1/rerun", {});
    expect([refused.status, refused.body.error.code]).toEqual([409, "LOOM_UNKNOWN_FLOW"]);
    expect(refused.body.error.message).toContain("loom ui --module");
    expect((await call<FlowsAnswer>(s, "/api/flows")).body).toEqual({ flows: [] });
  });

  it("P2: a read-only server answers 404 to fork and rerun, and still reads calls and flows", async () => {
    const s = await serve({ readOnly: true });
    await (await s.runtime.start(asks, { q: "r" }, { id: "r-1" })).result();
    const before = (await s.runtime.list()).length;
    for (const action of ["fork", "rerun"]) {
      const res = await call(s, `/api/executions/r-1/${action}`, { atSequence: 0 });
      expect(res.status, action).toBe(404);
    }
    expect((await s.runtime.list()).length).toBe(before);
    expect((await call(s, callPath("r-1", "flaky#0"))).status).toBe(200);
    expect((await call(s, "/api/flows")).status).toBe(200);
  });
});

describe("a sealed execution in the list of a dashboard without the key (log-errors.ts E3)", () => {
  it("E3: the list answers, the sealed row marked LOOM_CODEC_KEY with nothing of its payloads; with the key it is plain", async () => {
    const store = memoryStore();
    const codec = aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" });
    const writer = createRuntime({ store, codec, closeStore: false });
    writer.registerFlow(pays);
    open.push(() => writer.close());
    await (await writer.start(pays, { card: SECRET }, { id: "pay-1" })).result();
    const keyless = await serve({ store });
    const listed = await call<ListAnswer>(keyless, "/api/executions");
    expect(listed.status).toBe(200);
    const row = listed.body.executions.find((r) => r.executionId === "pay-1");
    expect(row?.error?.code).toBe("LOOM_CODEC_KEY");
    expect(row?.status).toBe("completed");
    expect(listed.text).not.toContain("4111");
    expect(listed.text).not.toContain("paid");
    // H1: its page is refused as content this dashboard cannot open, not as a server fault.
    const page = await call(keyless, "/api/executions/pay-1");
    expect([page.status, page.body.error.code]).toEqual([403, "LOOM_CODEC_KEY"]);
    expect(page.text).not.toContain("4111");
    const keyed = await serve({ store, runtime: { codec } });
    const plain = await call<ListAnswer>(keyed, "/api/executions");
    expect(plain.body.executions.find((r) => r.executionId === "pay-1")?.error).toBeUndefined();
  });
});
