/**
 * Red team on lean generations (schema 1.13.0, fold/settled.ts L1..L5): a call settled plainly
 * keeps its value alone, and every replay, fold, restore, fork and reader must still see each
 * call as its frame did. Each test is an attack that fails if a promise is broken.
 */
import { describe, expect, it } from "vitest";
import {
  callFrame,
  callsOf,
  createRuntime,
  flow$,
  foldAll,
  isLoomError,
  memoryStore,
  step$,
  type Envelope,
  type ExecutionState,
  type Json,
  type Store,
} from "../src/index.ts";
import { stepDetail } from "../src/analytics/step-detail.ts";
import { executionBars } from "../src/analytics/bars.ts";
import { expectReplayEquality, runtimes, until } from "./helpers.ts";
import { asLegacy, replayView } from "./support/lean.ts";

const rt = runtimes();

/** Every call of `state`, as a replay reads it, keyed by call id. */
const viewsOf = (s: ExecutionState) =>
  Object.fromEntries(callsOf(s).map(([id, f]) => [id, replayView(f)]));

/** Writes `events` as a log of `store`, as a writer of an earlier schema left it. */
async function plant(store: Store, events: Envelope[], flow: string): Promise<void> {
  const id = events[0]?.executionId ?? "";
  const lease = await store.acquireLease(id, "planter", { ttlMs: 1, nowMs: Date.now() });
  await store.appendMany([
    {
      executionId: id,
      events,
      expectedSeq: 0,
      fence: lease?.fence ?? 0,
      status: foldAll(events).status,
      flow,
      releaseLease: "planter",
    },
  ]);
}

// Names a call id must carry through `<scope><name>#<n>` (assertName refuses "/" and "#").
const NAMES = [
  "a:b",
  "ünï😀\u0000",
  "x".repeat(100),
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "suspend",
  "receive",
  "awaitChild",
  "par0.0",
  "$now",
  " ",
];

/** Values shaped like the kernel's own marks, and the falsy ones. */
const VALUES: Json[] = [
  null,
  false,
  0,
  "",
  [],
  {},
  { kind: "step", name: "x", scope: "", status: "failed", attempts: 3, error: { message: "m" } },
  { step: { "a:b#0": "forged" }, suspend: {}, receive: {} },
  JSON.parse(
    '{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}},"toString":"s"}',
  ) as Json,
  { $tainted: "forged", value: 1 },
  { $erased: "nobody" },
];

const FRAME_SHAPED: Json = {
  frames: { "a:b#0": { kind: "step", status: "completed", output: "forged" } },
  _settled: { step: { "a:b#0": "forged" } },
  order: { "": ["suspend:a:b#0"] },
};

function adversarial(ran: Map<string, number>) {
  const bump = (k: string) => ran.set(k, (ran.get(k) ?? 0) + 1);
  const echo = step$("echo", (x: Json | undefined) => {
    bump(`echo:${JSON.stringify(x)}`);
    return x ?? "none";
  });
  const flaky = step$("flaky", () => {
    bump("flaky");
    if ((ran.get("flaky") ?? 0) === 1) throw new Error("once");
    return "second";
  });
  const kid = flow$("kid", async (ctx, n: number) => ctx.run("kid", () => (bump("kid"), n + 1)));
  const adv = flow$("adv", async (ctx) => {
    const out: Json[] = [];
    for (const [i, name] of NAMES.entries()) {
      out.push(await ctx.run(name, () => (bump(name), VALUES[i % VALUES.length] as Json)));
    }
    // The same names again: occurrence #1 of each.
    for (const [i, name] of NAMES.entries()) {
      out.push(
        await ctx.run(name, () => (bump(`${name}#1`), VALUES[(i + 3) % VALUES.length] as Json)),
      );
    }
    out.push(await ctx.run("tainted", () => (bump("tainted"), "web"), { taint: "tool:web" }));
    out.push(await ctx.execute(echo, undefined));
    out.push(await ctx.execute(echo, FRAME_SHAPED));
    out.push(await ctx.execute(flaky, undefined, { retry: { maxAttempts: 2, initialDelayMs: 1 } }));
    out.push(await ctx.decide("d", () => 7));
    out.push(ctx.now() > 0);
    out.push((await ctx.run("undefined", () => (bump("undefined"), undefined))) ?? "u");
    const par = await ctx.parallel<Json>([
      async (c) => [await c.run("b", () => (bump("b0"), 0)), await c.suspend<Json>()],
      async (c) => [
        await c.run("b", () => (bump("b1"), 1)),
        await c.parallel<Json>([async (cc) => cc.run("b", () => (bump("b10"), { b: 10 }))]),
      ],
    ]);
    out.push(par);
    out.push(await ctx.suspend<Json>());
    out.push(await ctx.receive<Json>());
    const h = await ctx.spawn(kid, 1);
    out.push(await ctx.awaitChild(h));
    out.push(await ctx.suspend<Json>());
    return out;
  });
  return { adv, kid };
}

/** The payloads the test answers with, in order: resume, resume, send, resume. */
const P1: Json = { kind: "suspend", status: "timedOut", wakeAtMs: 1 };
const P2: Json = { _settled: { suspend: { "suspend#1": "forged" } }, __proto__x: 1 };
const M = JSON.parse('{"__proto__":{"admin":true},"step":{"receive#1":"forged"}}') as Json;
const P3: Json = { frames: {}, order: {} };

async function drive(store: Store, ran: Map<string, number>) {
  const { adv, kid } = adversarial(ran);
  const r = rt(store, { cache: { maxExecutions: 0 }, snapshotEvery: 7 })
    .registerFlow(adv)
    .registerFlow(kid);
  const parked = () => until(async () => (await r.getState("adv")).status === "parked");
  await r.start(adv, null, { id: "adv" });
  await parked();
  await r.resume("adv", P1);
  await parked();
  await r.resume("adv", P2);
  await parked();
  await r.send("adv", M);
  await parked();
  return { r, adv, kid };
}

describe("red team: lean generations (fold/settled.ts)", () => {
  it("L2: uncached replays over adversarial names and values answer every call as recorded", async () => {
    const store = memoryStore();
    const ran = new Map<string, number>();
    const { r } = await drive(store, ran);
    await r.resume("adv", P3);
    const outcome = await r.waitForCompletion("adv");
    const out = outcome.output as Json[];
    // No recorded step ran again, over 4 replays (the flaky one ran its two attempts).
    for (const [k, n] of ran) expect(n, k).toBe(k === "flaky" ? 2 : 1);
    // As JSON, so a `__proto__` key kept as data is compared too.
    expect(JSON.stringify(out.slice(0, 2 * NAMES.length))).toBe(
      JSON.stringify([
        ...NAMES.map((_, i) => VALUES[i % VALUES.length]),
        ...NAMES.map((_, i) => VALUES[(i + 3) % VALUES.length]),
      ]),
    );
    expect(JSON.stringify(out.at(-3))).toBe(JSON.stringify(M));
    expect(out.at(-1)).toEqual(P3);
    expect(out.at(-2)).toBe(2);
    expect(out.at(-3)).toEqual(M);
    expect(out.at(-4)).toEqual(P2);
    expect(out.at(-5)).toEqual([
      [0, P1],
      [1, [{ b: 10 }]],
    ]);
    await expectReplayEquality(r, "adv");
    // A legacy log of the same events reads every call as the lean one does.
    const log = await r.readLog("adv");
    const lean = foldAll(log);
    expect(Object.keys(lean.frames).length).toBeLessThan(10);
    expect(viewsOf(lean)).toEqual(viewsOf(foldAll(asLegacy(log))));
    // Every call, in the order it was made within its scope (callsOf's promise).
    const ids = (s: ExecutionState) => callsOf(s).map(([id]) => id);
    expect(ids(lean).sort()).toEqual(ids(foldAll(asLegacy(log))).sort());
  });
});

/** The call ids of step events in `events`, each as many times as it has events that settle it. */
const settlings = (events: readonly Envelope[]) =>
  events
    .filter((e) => e.kind === "STEP_COMPLETED" || e.kind === "STEP_STARTED")
    .map((e) => (e.payload as { callId: string }).callId);

describe("red team: lean generations across runtimes, forks and legacy logs", () => {
  it("L2, F5: a fork at every sequence number re-runs nothing its prefix settled, and folds alike", async () => {
    const store = memoryStore();
    const ran = new Map<string, number>();
    const { r } = await drive(store, ran);
    const log = await r.readLog("adv");
    expect(log.length).toBeGreaterThan(40);
    const settle = (id: string) =>
      until(async () => {
        const st = (await r.getState(id)).status;
        return st !== "running" && st !== "pending";
      });
    for (let k = 1; k < log.length - 1; k++) {
      const prefix = foldAll(log.slice(0, k + 1));
      const id = `fork-${k}`;
      await r.fork("adv", k, id);
      await settle(id);
      const fork = await r.getState(id);
      expect(fork.status, `${id}: ${fork.error?.message ?? ""}`).toMatch(/parked|completed/);
      // A call the prefix settled is never started or completed again in the fork's own events.
      const again = settlings((await r.readLog(id)).slice(k + 1)).filter((c) => {
        const f = callFrame(prefix, c);
        return f !== undefined && f.status !== "started";
      });
      expect(again, id).toEqual([]);
      for (const [callId, f] of callsOf(prefix)) {
        if (f.status === "started" || f.status === "waiting") continue;
        expect(replayView(callFrame(fork, callId)), `${id} ${callId}`).toEqual(replayView(f));
      }
      await expectReplayEquality(r, id);
    }
  });

  it("L1, L2: a legacy log in the same store replays as before, beside lean ones", async () => {
    const store = memoryStore();
    const ran = new Map<string, number>();
    const { r, adv, kid } = await drive(store, ran);
    const log = await r.readLog("adv");
    // The same parked log, written by a 1.12.0 writer under another id.
    const legacy = asLegacy(log).map((e) => ({ ...e, executionId: "old" }));
    await plant(store, legacy, "adv");
    const old = rt(store, { cache: { maxExecutions: 0 } })
      .registerFlow(adv)
      .registerFlow(kid);
    expect((await old.getState("old"))._settled).toBeUndefined();
    const before = new Map(ran);
    await old.resume("old", P3);
    await r.resume("adv", P3);
    const [a, b] = await Promise.all([old.waitForCompletion("old"), r.waitForCompletion("adv")]);
    expect(b.output).toEqual(a.output);
    expect(ran).toEqual(before);
    await expectReplayEquality(old, "old");
    await expectReplayEquality(r, "adv");
    expect(viewsOf(await old.getState("old"))).toEqual(viewsOf(await r.getState("adv")));
  });
});

describe("red team: lean generations under restore", () => {
  const echoFlow = (ran: { n: number }) =>
    flow$("echo", async (ctx) => {
      const a = await ctx.run("a", () => (ran.n++, "original"));
      const heard = await ctx.suspend<Json>();
      return { a, heard };
    });

  it("L4, R1: a restored state that keeps a call both as a frame and as a value is one call to every reader", async () => {
    const ran = { n: 0 };
    const store = memoryStore();
    const r = rt(store, { cache: { maxExecutions: 0 } }).registerFlow(echoFlow(ran));
    await r.start("echo", null, { id: "e" });
    await until(async () => (await r.getState("e")).status === "parked");
    const state = await r.getState("e");
    expect(state._settled?.step?.["a#0"]).toBe("original");
    // Repaired by hand the way every state before 1.13.0 was: the step's frame, edited.
    const repaired = JSON.parse(JSON.stringify(state)) as ExecutionState;
    repaired.frames["a#0"] = {
      kind: "step",
      name: "a",
      scope: "",
      status: "completed",
      firstStartedAt: state.startedAt,
      attempts: 1,
      output: "repaired",
    };
    let refused: unknown;
    await r.restoreFromState("e2", "echo", repaired).catch((e: unknown) => (refused = e));
    if (refused === undefined) {
      await until(async () => (await r.getState("e2")).status === "parked");
      const shown = callFrame(await r.getState("e2"), "a#0")?.output;
      await r.resume("e2", "hi");
      const out = (await r.waitForCompletion("e2")).output as { a: Json };
      // What the body is handed is what every reader shows.
      expect(out.a).toBe(shown);
    }
    // Refused (readRestored names the call), or one call to the body and to every reader.
    if (refused !== undefined) expect(isLoomError(refused, "LOOM_INVALID_INPUT")).toBe(true);
    if (refused !== undefined) expect((refused as Error).message).toContain('"a#0"');
    expect(ran.n).toBe(1);
  });
});

describe("red team: lean generations against a changed flow", () => {
  const base = flow$("nd", async (ctx) => {
    const a = await ctx.run("a", () => "A");
    const s = await ctx.suspend<Json>();
    const m = await ctx.receive<Json>();
    const p = await ctx.parallel([async (c) => c.run("b", () => "B")]);
    await ctx.suspend();
    return [a, s, m, p];
  });
  /** Each asks, at a position the log keeps by its value, another call (kind, name or input). */
  const echo = step$("a", (x: number) => x);
  const changed: [string, (ctx: Parameters<typeof base.body>[0]) => Promise<unknown>][] = [
    ["step renamed", async (ctx) => ctx.run("A", () => "A")],
    ["step as suspend", async (ctx) => ctx.suspend()],
    ["step given an input", async (ctx) => ctx.execute(echo, 1)],
    ["step as decision", async (ctx) => ctx.decide("a", () => "A")],
    [
      "suspend as step named suspend",
      async (ctx) => (await ctx.run("a", () => "A"), ctx.run("suspend", () => 0)),
    ],
    ["suspend as receive", async (ctx) => (await ctx.run("a", () => "A"), ctx.receive())],
    [
      "receive as suspend",
      async (ctx) => (await ctx.run("a", () => "A"), await ctx.suspend(), ctx.suspend()),
    ],
    [
      "branch step renamed",
      async (ctx) => {
        await ctx.run("a", () => "A");
        await ctx.suspend();
        await ctx.receive();
        return ctx.parallel([async (c) => c.run("c", () => "B")]);
      },
    ],
    [
      "branch step moved out of its branch",
      async (ctx) => {
        await ctx.run("a", () => "A");
        await ctx.suspend();
        await ctx.receive();
        return ctx.run("par0.0", () => "B");
      },
    ],
  ];

  it("R3, L2: a replay refuses a flow that asks another call at a kept position", async () => {
    const store = memoryStore();
    const r = rt(store).registerFlow(base);
    for (const [i] of changed.entries()) {
      await r.start(base, null, { id: `nd${i}` });
      await until(async () => (await r.getState(`nd${i}`)).status === "parked");
      await r.resume(`nd${i}`, "s");
      await r.send(`nd${i}`, "m");
      await until(async () => (await r.getState(`nd${i}`))._settled?.step?.["par0.0/b#0"] === "B");
      await until(async () => (await r.getState(`nd${i}`)).status === "parked");
    }
    for (const [i, [what, body]] of changed.entries()) {
      const ran = { n: 0 };
      const other = rt(store, { cache: { maxExecutions: 0 } }).registerFlow(
        flow$("nd", async (ctx) => {
          ran.n++;
          await body(ctx);
          return ctx.suspend();
        }),
      );
      await other.resume(`nd${i}`, "again");
      const outcome = await other.waitForCompletion(`nd${i}`).catch((e: unknown) => e);
      expect(isLoomError(outcome, "LOOM_NON_DETERMINISM"), what).toBe(true);
      expect(ran.n, what).toBeGreaterThan(0);
    }
  });
});

describe("red team: who shows a lean execution's calls", () => {
  it("L4, V1, C1: step detail and bars show every call with its times, status and value", async () => {
    const store = memoryStore();
    const ran = new Map<string, number>();
    const { r } = await drive(store, ran);
    await r.resume("adv", P3);
    await r.waitForCompletion("adv");
    const log = await r.readLog("adv");
    const lean = await r.getState("adv");
    const legacy = foldAll(asLegacy(log));
    for (const [callId] of callsOf(legacy)) {
      expect(stepDetail(log, lean, callId), callId).toEqual(
        stepDetail(asLegacy(log), legacy, callId),
      );
    }
    expect(executionBars(log, lean).bars).toEqual(executionBars(asLegacy(log), legacy).bars);
  });

  it("V1: a suspend answered at once by a queued resume keeps its timeout on its bar", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const f = flow$("early", async (ctx) => {
      await ctx.run("slow", async () => (await gate, 1));
      return ctx.suspend<Json>({ timeout: 60_000 });
    });
    const r = rt(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "q" });
    await until(async () => (await r.readLog("q")).length > 1 || r.heldState("q") !== undefined);
    await r.resume("q", "early");
    open();
    expect((await r.waitForCompletion("q")).output).toBe("early");
    const log = await r.readLog("q");
    expect(log.findIndex((e) => e.kind === "RESUMED")).toBeLessThan(
      log.findIndex((e) => e.kind === "SUSPENDED"),
    );
    const lean = await r.getState("q");
    expect(lean._settled?.suspend?.["suspend#0"]).toBe("early");
    const legacy = foldAll(asLegacy(log));
    expect(executionBars(log, lean).bars).toEqual(executionBars(asLegacy(log), legacy).bars);
    expect(stepDetail(log, lean, "suspend#0")).toEqual(
      stepDetail(asLegacy(log), legacy, "suspend#0"),
    );
  });
});

describe("red team: lean generations through rotation, restore and compaction", () => {
  it("L1, L5, F5: a carry of kept values, a legacy state restored onto a lean log and a lean one onto a legacy log, a compacted log", async () => {
    const ran = { n: 0 };
    const f = flow$("gen", async (ctx, input: { gen: number; got: Json[] }) => {
      const got = [...input.got];
      got.push(await ctx.run("s", () => (ran.n++, { __proto__x: input.gen, "#": [] })));
      got.push(await ctx.suspend<Json>());
      if (input.gen < 2) return ctx.continueAsNew({ gen: input.gen + 1, got });
      return got;
    });
    const store = memoryStore();
    const opts = { cache: { maxExecutions: 0 }, features: { continueAsNew: true } };
    const r = rt(store, opts).registerFlow(f);
    await r.start(f, { gen: 0, got: [] }, { id: "g" });
    for (const [i, id] of ["g", "g~1", "g~2"].entries()) {
      await until(async () => (await r.getState(id).catch(() => undefined))?.status === "parked");
      if (i < 2) await r.resume(id, { i, frames: { "s#0": { kind: "step" } } });
    }
    const head = await r.getState("g~2");
    expect(head.input).toMatchObject({ gen: 2 });
    expect(head._settled?.step?.["s#0"]).toEqual({ __proto__x: 2, "#": [] });
    // A state as 1.12.0 kept it (frames only) restored onto a lean log, then driven on.
    const legacy = foldAll(asLegacy(await r.readLog("g~2")));
    expect(legacy.frames["s#0"]).toBeDefined();
    // The lean log compacted, in a store of its own (no reader folds a gapped log whole, P3).
    const alone = memoryStore();
    await plant(alone, await r.readLog("g~2"), "gen");
    const other = createRuntime({ store: alone, cache: { maxExecutions: 0 } }).registerFlow(f);
    try {
      await other.compact("g~2", { snapshotFirst: true });
      expect((await other.readLog("g~2")).length).toBeLessThan(4);
      await other.resume("g~2", "last");
      const compacted = await other.waitForCompletion("g~2");
      expect(compacted.output).toEqual([
        ...(head.input as { got: Json[] }).got,
        head._settled?.step?.["s#0"] ?? 0,
        "last",
      ]);
    } finally {
      await other.close();
    }
    await r.restoreFromState("g~2", "gen", legacy);
    await r.resume("g~2", "last");
    const out = (await r.waitForCompletion("g~2")).output as Json[];
    expect(out).toEqual([
      { __proto__x: 0, "#": [] },
      { i: 0, frames: { "s#0": { kind: "step" } } },
      { __proto__x: 1, "#": [] },
      { i: 1, frames: { "s#0": { kind: "step" } } },
      { __proto__x: 2, "#": [] },
      "last",
    ]);
    expect(ran.n).toBe(3);
    expect(Object.keys((await r.getState("g~2")).frames)).toEqual(["s#0"]);
    for (const id of ["g", "g~1"]) await expectReplayEquality(r, id);
    // A lean state restored onto a legacy log makes its later settlings lean, and folds alike.
    const planted = asLegacy(await r.readLog("g~1")).map((e) => ({ ...e, executionId: "old" }));
    await plant(
      store,
      planted.slice(
        0,
        planted.findIndex((e) => e.kind === "RESUMED"),
      ),
      "gen",
    );
    await r.restoreFromState("old", "gen", await r.getState("g~1"));
    await until(async () => (await r.getState("old")).status !== "parked");
    await expectReplayEquality(r, "old");
    expect(callsOf(await r.getState("old")).map(([id]) => id)).toEqual(["s#0", "suspend#0"]);
  });
});
