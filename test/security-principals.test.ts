/**
 * Issue 22 item 6: principals guard every verb (ADR 0111). Each test is the exploit a caller
 * acting as "mallory" tried against "alice"'s work: it is refused with a typed error and nothing
 * is appended, and the owner then proceeds. Live deltas are one runtime's (effects/deltas.ts D1,
 * D2), schedules have owners (runtime/schedules.ts SC2), `list({ as })` lists one principal's.
 */
import { afterEach, describe, expect, it, onTestFinished } from "vitest";
import {
  callFrame,
  createRuntime,
  flow$,
  isLoomError,
  memoryStore,
  type Runtime,
  type Store,
} from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { fakeAnthropic, type FakeAnthropic } from "../src/testing/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const servers: FakeAnthropic[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const ask = { messages: [{ role: "user" as const, content: "tell me about tides" }] };

/** A flow that waits for a resume, then streams `text` from a fake model of its own. */
async function talker(text: string) {
  const fake = await fakeAnthropic({ text, deltaChars: 8, deltaMs: 1 });
  servers.push(fake);
  const llm = anthropicEffect({
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    baseURL: fake.baseURL,
  });
  return flow$("talk", async (ctx) => {
    await ctx.suspend();
    return (await ctx.execute(llm, ask)).text;
  });
}

/** A flow that waits for a resume and returns it. */
const waits = flow$("waits", async (ctx) => ctx.suspend<string>());

/** What refused a call: its code, or "no error". */
async function refusal(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => "no error",
    (e: unknown) => (isLoomError(e) ? e.code : String(e)),
  );
}

async function parked(r: Runtime, id: string, as?: string): Promise<void> {
  await until(
    async () => (await r.getState(id, as === undefined ? {} : { as })).status === "parked",
  );
}

async function collect(it: AsyncIterableIterator<{ text: string }>): Promise<string> {
  let all = "";
  for await (const d of it) all += d.text;
  return all;
}

describe("live deltas (effects/deltas.ts D1, D2)", () => {
  it("D2: mallory's deltas of alice's execution reject before any delta; alice's see the stream", async () => {
    const text = "tides rise and fall twice a day. ".repeat(6);
    const talk = await talker(text);
    const r = rt(memoryStore()).registerFlow(talk);
    await r.start(talk, null, { id: "t", principal: "alice" });
    await parked(r, "t", "alice");
    const mallory = r.deltas("t", { as: "mallory" });
    const anonymous = r.deltas("t");
    const alice = r.deltas("t", { as: "alice" });
    const before = (await r.readLog("t", { as: "alice" })).length;
    await r.resume("t", null, { as: "alice" });
    expect(await collect(alice)).toBe(text);
    expect(await refusal(mallory.next())).toBe("LOOM_UNAUTHORIZED");
    expect(await refusal(anonymous.next())).toBe("LOOM_UNAUTHORIZED");
    // A refused subscription stays refused: nothing it queued is handed out later.
    expect(await refusal(mallory.next())).toBe("LOOM_UNAUTHORIZED");
    expect((await r.readLog("t", { as: "alice" })).length).toBeGreaterThan(before);
    expect((await r.waitForCompletion("t", { as: "alice" })).output).toBe(text);
  });

  it("D2: a subscription made before the execution exists never gets its deltas once it is another principal's", async () => {
    const text = "the moon pulls the sea. ".repeat(8);
    const fake = await fakeAnthropic({ text, deltaChars: 8, deltaMs: 1 });
    servers.push(fake);
    const llm = anthropicEffect({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      baseURL: fake.baseURL,
    });
    const now = flow$("now", async (ctx) => (await ctx.execute(llm, ask)).text);
    // The widest window a subscriber can hope for: its reads of "soon" are answered only once
    // alice's start is written, whatever they ask, except that its first event is not there yet.
    let started = () => {};
    const written = new Promise<void>((res) => (started = res));
    const inner = memoryStore();
    const slow: Store = {
      ...inner,
      head: async (id) => {
        if (id === "soon") await written;
        return inner.head(id);
      },
    };
    const r = rt(slow).registerFlow(now);
    const early = r.deltas("soon", { as: "mallory" });
    const anonymous = r.deltas("soon");
    await new Promise((res) => setTimeout(res, 20));
    const h = await r.start(now, null, { id: "soon", principal: "alice" });
    started();
    expect((await h.result()).output).toBe(text);
    for (const it of [early, anonymous]) {
      const seen = await collect(it).catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
      expect(seen === "" || seen === "LOOM_UNAUTHORIZED").toBe(true);
    }
  });

  it("D1: two runtimes on two stores in one process, one id: each sees only its own execution's deltas", async () => {
    const textA = "a".repeat(160);
    const textB = "b".repeat(160);
    const ra = rt(memoryStore()).registerFlow(await talker(textA));
    const rb = rt(memoryStore()).registerFlow(await talker(textB));
    await ra.start("talk", null, { id: "x" });
    await rb.start("talk", null, { id: "x" });
    await parked(ra, "x");
    await parked(rb, "x");
    const seenByB = rb.deltas("x");
    await ra.resume("x", null);
    expect((await ra.waitForCompletion("x")).output).toBe(textA);
    await rb.resume("x", null);
    expect(await collect(seenByB)).toBe(textB);
  });
});

describe("eraseSubject as a principal", () => {
  it("mallory's erasure of a subject alice's execution holds is refused, naming nothing of it; nothing is cancelled, recorded or destroyed; alice's proceeds", async () => {
    // Its own runtime: an erased log's redacted snapshot is not what a replay of its events
    // folds to (erase-subject.ts X5), which the shared runtimes' after-test check compares.
    const r = createRuntime({ store: memoryStore(), pollIntervalMs: 20 }).registerFlow(waits);
    onTestFinished(() => r.close());
    await r.start(waits, { card: "4111" }, { id: "alice-1", subject: "carol", principal: "alice" });
    await r.start(waits, { card: "4111" }, { id: "open-1", subject: "carol" });
    await parked(r, "alice-1", "alice");
    await parked(r, "open-1");
    const logs = async () => [
      (await r.readLog("alice-1", { as: "alice" })).length,
      (await r.readLog("open-1")).length,
    ];
    const before = await logs();
    const refused = await r.eraseSubject("carol", { as: "mallory" }).catch((e: unknown) => e);
    expect(isLoomError(refused, "LOOM_UNAUTHORIZED")).toBe(true);
    expect(String((refused as Error).message)).not.toContain("alice-1");
    expect(JSON.stringify((refused as { details?: unknown }).details)).not.toContain("alice-1");
    expect(await logs()).toEqual(before);
    expect((await r.getState("alice-1", { as: "alice" })).input).toEqual({ card: "4111" });
    expect((await r.getState("open-1")).status).toBe("parked");
    const erased = await r.eraseSubject("carol", { as: "alice" });
    expect(erased.executions.sort()).toEqual(["alice-1", "open-1"]);
    expect(erased.cancelled.sort()).toEqual(["alice-1", "open-1"]);
    expect(erased.keyDestroyed).toBe(true);
  });
});

describe("heldState", () => {
  it("mallory cannot read the state alice's run holds in memory; alice can", async () => {
    let release = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const busy = flow$("busy", async (ctx) => {
      await ctx.run("first", () => 1);
      await ctx.run("wait", () => gate.then(() => 2));
      return "done";
    });
    const r = rt(memoryStore()).registerFlow(busy);
    const h = await r.start(busy, null, { id: "b", principal: "alice" });
    await until(() => {
      const held = r.heldState("b", { as: "alice" });
      return held !== undefined && callFrame(held, "first#0")?.status === "completed";
    });
    expect(() => r.heldState("b", { as: "mallory" })).toThrow(/may not act on execution/);
    expect(() => r.heldState("b")).toThrow(/may not act on execution/);
    release();
    expect((await h.result()).output).toBe("done");
  });
});

describe("list({ as }) (verbs-list.ts LS1)", () => {
  it("LS1: lists only that principal's executions, a page at a time; without `as`, every one", async () => {
    const r = rt(memoryStore()).registerFlow(waits);
    for (const [id, principal] of [
      ["a1", "alice"],
      ["m1", "mallory"],
      ["o1", undefined],
      ["a2", "alice"],
    ] as const) {
      await r.start(waits, null, principal === undefined ? { id } : { id, principal });
    }
    const ids = (xs: { executionId: string }[]) => xs.map((x) => x.executionId);
    expect(ids(await r.list({ as: "mallory" }))).toEqual(["m1"]);
    expect(ids(await r.list({ as: "alice" }))).toEqual(["a1", "a2"]);
    expect(ids(await r.list({ as: "alice", limit: 1 }))).toEqual(["a1"]);
    expect(ids(await r.list({ as: "alice", afterId: "a1" }))).toEqual(["a2"]);
    expect(ids(await r.list({ as: "nobody" }))).toEqual([]);
    expect(ids(await r.list()).sort()).toEqual(["a1", "a2", "m1", "o1"]);
    expect(await refusal(r.list({ as: "" }))).toBe("LOOM_INVALID_INPUT");
  });
});

describe("schedules have owners (schedules.ts SC2)", () => {
  it("mallory cannot redefine, remove or list alice's schedule, nor read its occurrences; alice can", async () => {
    let t = Date.UTC(2026, 10, 30, 8, 0, 0);
    const r = rt(memoryStore(), { clock: { now: () => t }, background: false }).registerFlow(waits);
    const cron = "* * * * *";
    const mine = await r.schedule(waits, { cron, name: "nightly", input: "x", principal: "alice" });
    expect(mine).toMatchObject({ name: "nightly", input: "x", principal: "alice" });
    const evil = { cron, name: "nightly", input: "evil" };
    expect(await refusal(r.schedule(waits, { ...evil, principal: "mallory" }))).toBe(
      "LOOM_UNAUTHORIZED",
    );
    expect(await refusal(r.schedule(waits, evil))).toBe("LOOM_UNAUTHORIZED");
    expect(await refusal(r.unschedule("nightly", { as: "mallory" }))).toBe("LOOM_UNAUTHORIZED");
    expect(await refusal(r.unschedule("nightly"))).toBe("LOOM_UNAUTHORIZED");
    expect(await r.store.listSchedules()).toMatchObject([{ name: "nightly", input: "x" }]);
    expect(await r.schedules({ as: "mallory" })).toEqual([]);
    expect(await r.schedules({ as: "alice" })).toMatchObject([{ name: "nightly" }]);
    t += 61_000;
    const [occurrence] = await r.fireSchedules();
    expect(occurrence).toBeDefined();
    const id = occurrence as string;
    expect(await refusal(r.getState(id, { as: "mallory" }))).toBe("LOOM_UNAUTHORIZED");
    expect(await refusal(r.resume(id, "go"))).toBe("LOOM_UNAUTHORIZED");
    await r.resume(id, "go", { as: "alice" });
    expect((await r.waitForCompletion(id, { as: "alice" })).output).toBe("go");
    await r.unschedule("nightly", { as: "alice" });
    expect(await r.schedules()).toEqual([]);
    // The name stays alice's: mallory cannot take it over once it is removed.
    expect(await refusal(r.schedule(waits, { ...evil, principal: "mallory" }))).toBe(
      "LOOM_UNAUTHORIZED",
    );
    expect(await r.schedule(waits, { cron, name: "nightly", principal: "alice" })).toMatchObject({
      principal: "alice",
    });
  });

  it("an open schedule stays open to every caller, but a principal cannot take it over", async () => {
    const r = rt(memoryStore(), { background: false }).registerFlow(waits);
    await r.schedule(waits, { cron: "0 0 * * *", name: "open" });
    expect(
      await refusal(r.schedule(waits, { cron: "0 1 * * *", name: "open", principal: "alice" })),
    ).toBe("LOOM_UNAUTHORIZED");
    await r.schedule(waits, { cron: "0 2 * * *", name: "open" });
    expect(await r.schedules()).toMatchObject([{ name: "open", cron: "0 2 * * *" }]);
    expect((await r.schedules())[0]).not.toHaveProperty("principal");
    await r.unschedule("open", { as: "mallory" });
    expect(await r.schedules()).toEqual([]);
  });
});

describe("fork, children and chains keep the owner", () => {
  it("mallory cannot fork alice's execution; alice's fork is hers, and its handle acts as her", async () => {
    const r = rt(memoryStore()).registerFlow(waits);
    await r.start(waits, null, { id: "src", principal: "alice" });
    await parked(r, "src", "alice");
    expect(await refusal(r.fork("src", 0, "stolen", { as: "mallory" }))).toBe("LOOM_UNAUTHORIZED");
    expect(await r.store.head("stolen")).toBe(-1);
    const fork = await r.fork("src", 0, "copy", { as: "alice" });
    await parked(r, "copy", "alice");
    expect(await refusal(r.resume("copy", "no", { as: "mallory" }))).toBe("LOOM_UNAUTHORIZED");
    await r.resume("copy", "yes", { as: "alice" });
    expect((await fork.result()).output).toBe("yes");
  });

  it("a child and a successor are their parent's owner's: mallory can read neither", async () => {
    const child = flow$("child", async (ctx) => ctx.suspend<string>());
    const parent = flow$("parent", async (ctx, gen: number | null) => {
      if (gen === null) return ctx.continueAsNew(1);
      return ctx.awaitChild(await ctx.spawn(child, null, { key: "kid" }));
    });
    const r = rt(memoryStore(), { features: { continueAsNew: true } })
      .registerFlow(child)
      .registerFlow(parent);
    await r.start(parent, null, { id: "p", principal: "alice" });
    await until(async () => (await r.store.head("p~1::kid#0")) >= 0);
    await parked(r, "p~1::kid#0", "alice");
    for (const id of ["p~1", "p~1::kid#0"]) {
      expect(await refusal(r.getState(id, { as: "mallory" }))).toBe("LOOM_UNAUTHORIZED");
      expect(await refusal(r.cancel(id, "no", { as: "mallory" }))).toBe("LOOM_UNAUTHORIZED");
    }
    expect(await refusal(r.send("p", "hi", { as: "mallory" }))).toBe("LOOM_UNAUTHORIZED");
    await r.resume("p~1::kid#0", "done", { as: "alice" });
    expect((await r.waitForCompletion("p~1", { as: "alice" })).output).toBe("done");
  });
});
