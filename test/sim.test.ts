/**
 * The simulator in CI (sim/): a fixed set of seeds passes every invariant, with one process and on
 * a fleet's store; the same seed runs the same way twice, in either mode; the simulator catches a
 * deliberately broken store, printing the seed and the command that reproduces the failure; the
 * known bugs of the runtime it steers clear of are still there, each found again by its seed; and
 * the budget invariant on real spend (SIM4), the chain invariants (SIM8, SIM9), SIM10, the fork
 * invariants (SIM11), the children's (SIM12..SIM15) and the fleet's (SIM16) report hand-made logs
 * or commits that break them. The seeds that draw flow control (queues and limiters, SIM17 and
 * SIM18) run them under crashes and fleets here; their checkers' own tests are in
 * sim-flow-control.test.ts.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Envelope, InboxMessage, Json } from "../src/index.ts";
import { runSeed } from "../sim/simulator.ts";
import { checkFences, FenceOwners, fleetMode } from "../sim/fleet.ts";
import { checkSpend, RealSpend } from "../sim/spend.ts";
import { FencedError } from "../src/kernel/errors.ts";
import {
  checkChain,
  checkChainEnd,
  checkFork,
  checkLog,
  markSuccessors,
  type ChainView,
} from "../sim/invariants.ts";
import {
  checkChildDone,
  checkChildStart,
  checkQuiesced,
  checkSlots,
} from "../sim/child-invariants.ts";
import { slow } from "./support/slowdown.ts";

/**
 * Seeds that once failed, kept as regressions: 1688 and 2667 caught the checker itself flagging
 * an attempt that began inside a cross-process cancel's notice window (SIM2 now grants it SIM5's
 * grace). 1313 caught a chain whose generation was cancelled in its start-to-commit window while
 * its successor ran on and completed (SIM8). 198 caught a resume appended to a generation whose
 * successor had started, lost when it crashed before its commit (SIM9's resume twin). 1665 caught
 * SIM15 holding a CHILD_DONE to its child's newest generation's error: a child cancelled in its
 * start-to-commit window ends twice cancelled (its successor with the chain's closure, K4, with
 * another error), and the CHILD_DONE may carry either. Four caught bugs of the runtime's
 * children (docs/simulation.md): 1 a store failure in awaitChild failing the flow (within 1..40),
 * 57 a fork waiting for good on its origin's child, 24 a settled slot settled again in a
 * successor, 346 a CHILD_DONE appended to a generation in its start-to-commit window, 206 a fork
 * cut between an await of a carried child and its CHILD_DONE. 379 caught a cancel of a generation
 * whose successor had already completed the chain (SIM8). All were found with one process,
 * the mode they run in here (`npm run sim -- --seeds 1 --from S --single`), and without flow
 * control (`--no-flow`), which they were found without.
 */
const REGRESSIONS = [1688, 2667, 1313, 198, 1665, 57, 24, 346, 206, 379];
/**
 * 30 seeds, not 120 as before children (a seed spawns 8 children on average) nor 40 as before
 * flow control (3 seeds in 5 wait in queues and on limiters, which makes them longer), so the
 * suite stays within its time. `npm run sim -- --seeds 1000` runs more.
 */
const CI_SEEDS = [...Array.from({ length: 30 }, (_, i) => i + 1), ...REGRESSIONS];
/**
 * 16 seeds on a fleet's store (fleet.ts; 20 before flow control), and 31 and 38, which caught the claim path giving back
 * an execution it held parked in its cache (resumed elsewhere, then claimed here) at every poll,
 * so nobody drove it (SIM7; docs/simulation.md). They run with their mode forced, as CI_SEEDS do
 * (with one process: the mode those seeds were chosen in), so a seed in a list keeps its meaning
 * whatever it draws.
 */
const FLEET_SEEDS = [...Array.from({ length: 16 }, (_, i) => i + 1), 31, 38];

describe("the deterministic simulator", () => {
  it(`passes every invariant on ${CI_SEEDS.length} fixed seeds`, async () => {
    let crashes = 0;
    let events = 0;
    let rotations = 0;
    let messages = 0;
    let forks = 0;
    let children = 0;
    let childRotations = 0;
    let cascades = 0;
    const ended: Record<string, number> = {};
    const flow = { seeds: 0, queued: 0, admitted: 0, limitedCalls: 0, waits: 0, crashes: 0 };
    for (const seed of CI_SEEDS) {
      const regression = REGRESSIONS.includes(seed);
      const r = await runSeed(seed, {
        fleet: false,
        ...(regression ? { flowControl: false } : {}),
      });
      const again = `npm run sim -- --seeds 1 --from ${seed} --single${regression ? " --no-flow" : ""}`;
      expect(r.violations, `seed ${seed}: ${again}`).toEqual([]);
      crashes += r.crashes;
      events += r.events;
      rotations += r.rotations;
      messages += r.messages;
      forks += r.forks;
      children += r.children;
      childRotations += r.childRotations;
      cascades += r.cascades;
      for (const [status, n] of Object.entries(r.ended)) ended[status] = (ended[status] ?? 0) + n;
      if (r.flowControl) flow.seeds++;
      flow.queued += r.queued;
      flow.admitted += r.admitted;
      flow.limitedCalls += r.limitedCalls;
      flow.waits += r.limiterWaits;
      flow.crashes += r.flowCrashes;
    }
    // The seeds exercise what they are meant to: crashes happen, logs grow, chains rotate and
    // take messages, children are spawned, continue as new and are cascaded, and executions end
    // every way an execution can end here.
    expect(crashes).toBeGreaterThan(CI_SEEDS.length);
    expect(events).toBeGreaterThan(CI_SEEDS.length * 20);
    expect(rotations).toBeGreaterThan(CI_SEEDS.length / 2);
    expect(messages).toBeGreaterThan(CI_SEEDS.length);
    expect(forks).toBeGreaterThan(CI_SEEDS.length / 2);
    expect(children).toBeGreaterThan(CI_SEEDS.length * 2);
    expect(childRotations).toBeGreaterThan(0);
    expect(cascades).toBeGreaterThan(0);
    expect(Object.keys(ended).sort()).toEqual(["cancelled", "completed", "continued", "failed"]);
    // Flow control (SIM17, SIM18): executions wait in queues and are admitted, calls wait on
    // limiters, and processes crash in the queues' and limiters' calls or mid-call.
    expect(flow.seeds).toBeGreaterThan(CI_SEEDS.length / 4);
    expect(flow.queued).toBeGreaterThan(flow.seeds);
    expect(flow.admitted).toBeGreaterThan(flow.seeds);
    expect(flow.limitedCalls).toBeGreaterThan(flow.seeds * 3);
    expect(flow.waits).toBeGreaterThan(flow.seeds);
    expect(flow.crashes).toBeGreaterThan(2);
  });

  it(`passes every invariant on ${FLEET_SEEDS.length} fixed seeds on a fleet's store`, async () => {
    let crashes = 0;
    let claims = 0;
    let children = 0;
    let members = 0;
    let flowCrashes = 0;
    let limitedCalls = 0;
    let admitted = 0;
    const sizes = new Set<number>();
    for (const seed of FLEET_SEEDS) {
      const r = await runSeed(seed, { fleet: true });
      const again = `npm run sim -- --seeds 1 --from ${seed} --fleet`;
      expect(r.violations, `seed ${seed}: ${again}`).toEqual([]);
      expect(r.fleet).toBe(true);
      crashes += r.crashes;
      claims += r.claims;
      children += r.children;
      members += r.members;
      sizes.add(r.members);
      flowCrashes += r.flowCrashes;
      limitedCalls += r.limitedCalls;
      admitted += r.admitted;
    }
    // Members crash and recover by claims, alone or beside one or two others, children included.
    expect(crashes).toBeGreaterThan(FLEET_SEEDS.length);
    expect(claims).toBeGreaterThan(FLEET_SEEDS.length);
    expect(children).toBeGreaterThan(FLEET_SEEDS.length);
    expect(members).toBeGreaterThan(FLEET_SEEDS.length);
    expect([...sizes].sort()).toEqual([1, 2, 3]);
    // Queues and limiters under a fleet's takeovers (SIM17, SIM18).
    expect(admitted).toBeGreaterThan(FLEET_SEEDS.length / 2);
    expect(limitedCalls).toBeGreaterThan(FLEET_SEEDS.length);
    expect(flowCrashes).toBeGreaterThan(0);
  });

  it("draws a fleet of 1 to 3 members for about half the seeds, unless told", () => {
    const modes = Array.from({ length: 200 }, (_, i) => fleetMode(i + 1));
    const fleets = modes.filter((m) => m.fleet);
    expect(fleets.length).toBeGreaterThan(70);
    expect(fleets.length).toBeLessThan(130);
    expect(new Set(fleets.map((m) => m.size))).toEqual(new Set([1, 2, 3]));
    expect(modes.filter((m) => !m.fleet).map((m) => m.size)).toEqual(
      Array.from({ length: 200 - fleets.length }, () => 1),
    );
    const seed = modes.findIndex((m) => m.fleet) + 1;
    expect(fleetMode(seed, false)).toMatchObject({ fleet: false, size: 1 });
  });

  it("runs a seed the same way every time, down to the bytes of its logs", async () => {
    const harsh = { faults: { crash: 0.02, transient: 0.02, delay: 0.5, maxDelayMs: 30 } };
    for (const fleet of [false, true]) {
      const first = await runSeed(42, { ...harsh, fleet });
      expect(first.crashes).toBeGreaterThan(0);
      expect(first.fleet).toBe(fleet);
      await runSeed(43, harsh); // another seed in between changes nothing
      expect(await runSeed(42, { ...harsh, fleet })).toEqual(first);
    }
  });

  it("catches a store that drops an append after acknowledging it, and prints the seed", () => {
    const cli = join(import.meta.dirname, "..", "sim", "cli.ts");
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", cli, "--seeds", "1000", "--mutate", "drop-after-ack", "--stop"],
      { encoding: "utf8", timeout: slow(120_000) },
    );
    expect(run.status).toBe(1);
    const seed = Number(/seed (\d+) failed/.exec(run.stderr)?.[1]);
    expect(seed).toBeGreaterThanOrEqual(1);
    expect(seed).toBeLessThanOrEqual(1000);
    expect(run.stderr).toContain(
      `reproduce: npm run sim -- --seeds 1 --from ${seed} --steps 60 --mutate drop-after-ack`,
    );
    expect(JSON.parse(run.stdout)).toMatchObject({ name: "sim", failed: [seed] });
  });
});

/** Hand-made logs of a chain "c" and its inbox, for the invariant functions alone. */
function event(id: string, seq: number, kind: Envelope["kind"], payload: Json): Envelope {
  const kernel = kind.startsWith("EXECUTION_") && kind !== "EXECUTION_STARTED";
  return { executionId: id, seq, kind, at: 1000 + seq, payload, meta: kernel ? { kernel } : {} };
}
const start = { flow: "sim", flowVersion: "1", fingerprint: "f", schemaVersion: "1.5.0" };
const generation = (n: number, inbox?: Json) =>
  event(`c~${n}`, 0, "EXECUTION_STARTED", {
    ...start,
    chainId: "c",
    generation: n,
    continuedFrom: { executionId: n === 1 ? "c" : `c~${n - 1}`, carried: inbox ? { inbox } : {} },
  });
const take = (id: string, seq: number, message: number, key: string) =>
  event(id, seq, "MESSAGE_CONSUMED", {
    callId: `receive#${message}`,
    scope: "",
    name: "receive",
    topic: "main",
    seq: message,
    key,
    payload: message,
  });
const continued = (id: string, seq: number, to: number) =>
  event(id, seq, "EXECUTION_CONTINUED", { successorId: `c~${to}`, chainId: "c", generation: to });
const sent = (seq: number, key: string): InboxMessage => ({
  chainId: "c",
  seq,
  topic: "main",
  key,
  payload: seq,
  atMs: 1000,
});

/** Generation 0 took m0 and continued; generation 1 took m1 and completed. */
function goodChain(): Envelope[][] {
  return [
    [event("c", 0, "EXECUTION_STARTED", start), take("c", 1, 0, "m0"), continued("c", 2, 1)],
    [
      generation(1, { cursors: { main: 0 }, dedupe: ["m0"] }),
      take("c~1", 1, 1, "m1"),
      event("c~1", 2, "EXECUTION_COMPLETED", { output: { received: 2, sum: 1 } }),
    ],
  ];
}

function violationsOf(logs: Envelope[][], frozenAt = new Map<number, number>()): string[] {
  const view: ChainView = { chainId: "c", logs, messages: [sent(0, "m0"), sent(1, "m1")] };
  const out: string[] = [];
  markSuccessors(view, frozenAt);
  checkChain(view, frozenAt, out);
  checkChainEnd(view, { turns: 2, every: 1, turn: [] }, out);
  return out;
}

describe("the chain invariants report a broken chain (SIM8, SIM9)", () => {
  it("pass a chain that rotated once and took each message once", () => {
    expect(violationsOf(goodChain())).toEqual([]);
  });

  it("SIM8: a predecessor that goes on working after its successor started is a second live generation", () => {
    const [first = [], second = []] = goodChain();
    // The first read saw the successor when generation 0 had taken m0 and not yet committed.
    const frozenAt = new Map([[0, 2]]);
    const working = [
      ...first.slice(0, 2),
      event("c", 2, "STEP_STARTED", { callId: "work#0", scope: "", name: "work" }),
    ];
    expect(violationsOf([working, second], frozenAt)).toContain(
      "SIM8 c: two live generations: c appended STEP_STARTED at 2 after its successor c~1 started",
    );
  });

  it("SIM8: a commit whose successor does not exist, and a successor that outlived a cancel", () => {
    const [first = []] = goodChain();
    expect(violationsOf([first])).toContain(
      "SIM8 c: committed EXECUTION_CONTINUED, but c~1 has no log",
    );
    const [, second = []] = goodChain();
    const cancelled = [...first.slice(0, 2), event("c", 2, "EXECUTION_CANCELLED", {})];
    expect(violationsOf([cancelled, second])).toContain(
      "SIM8 c~1: ended completed, after its predecessor was cancelled",
    );
  });

  it("SIM9: a successor that did not carry the cursor takes a message a second time", () => {
    const [first = []] = goodChain();
    const again = [
      generation(1),
      take("c~1", 1, 0, "m0"),
      take("c~1", 2, 1, "m1"),
      event("c~1", 3, "EXECUTION_COMPLETED", { output: { received: 3, sum: 1 } }),
    ];
    expect(violationsOf([first, again])).toEqual([
      `SIM9 c~1: started with the inbox null, its predecessor left {"cursors":{"main":0},"dedupe":["m0"]}`,
      "SIM9 c~1 (at 1): took message 0 of main a second time",
      "SIM9 c~1 (at 1): message 0 delivered key m0 again (first at c (at 1))",
      "SIM9 c~1: received 3 messages, its chain consumed 2",
    ]);
  });

  it("SIM9: a sender's retry delivered to the flow, and a conversation that missed a message", () => {
    const [first = []] = goodChain();
    // The successor kept the cursor but lost the dedupe window: the retry of m0 reaches the flow.
    const retried = [
      generation(1, { cursors: { main: 0 }, dedupe: [] }),
      take("c~1", 1, 1, "m0"),
      event("c~1", 2, "EXECUTION_COMPLETED", { output: { received: 2, sum: 1 } }),
    ];
    const view: ChainView = {
      chainId: "c",
      logs: [first, retried],
      messages: [sent(0, "m0"), sent(1, "m0")],
    };
    const out: string[] = [];
    checkChain(view, new Map(), out);
    checkChainEnd(view, { turns: 2, every: 1, turn: [] }, out);
    expect(out).toContain("SIM9 c~1 (at 1): message 1 delivered key m0 again (first at c (at 1))");
    expect(out).toContain("SIM9 c: completed without receiving m1");
  });
});

describe("SIM10", () => {
  it("reports an execution whose recorded outcome is a store's failure", () => {
    const error = { name: "Error", message: "simulated transient failure of readMessages" };
    const log = [
      event("x", 0, "EXECUTION_STARTED", start),
      event("x", 1, "EXECUTION_FAILED", { error }),
    ];
    const out: string[] = [];
    checkLog("x", log, out);
    expect(out).toEqual([
      "SIM10 x: EXECUTION_FAILED at 1 records a store's failure: simulated transient failure of readMessages",
    ]);
  });
});

/** A fork "f" of generation 0 of chain "c" at its sequence 1 (after it took m0). */
function forkOf(at = 1): Envelope[] {
  const [first = []] = goodChain();
  const copy = first.slice(0, at + 1).map((e) => ({
    ...e,
    executionId: "f",
    meta: { ...e.meta, fence: 1, forkedFrom: { executionId: "c", seq: at } },
  }));
  return [...copy, event("f", at + 1, "EXECUTION_COMPLETED", { output: { received: 1, sum: 0 } })];
}

describe("the fork invariants report a broken fork (SIM11, SIM9)", () => {
  const origin = { origin: "c", at: 1 };
  const [first = []] = goodChain();

  it("pass a fork that copied its origin's prefix and consumed nothing of its stream", () => {
    const out: string[] = [];
    checkFork("f", forkOf(), origin, first, out);
    const view: ChainView = { chainId: "f", logs: [forkOf()], messages: [] };
    checkChain(view, new Map(), out);
    checkChainEnd(view, { turns: 1, every: 1, turn: [] }, out);
    expect(out).toEqual([]);
  });

  it("SIM11: a copy that differs from the prefix, is not marked, or marks what came after", () => {
    const log = forkOf();
    const [e0 = log[0]!, e1 = log[1]!, e2 = log[2]!] = log;
    const broken = [
      { ...e0, payload: { ...start, flow: "other" } },
      { ...e1, meta: {} },
      { ...e2, meta: { ...e2.meta, forkedFrom: { executionId: "c", seq: 1 } } },
    ];
    const out: string[] = [];
    checkFork("f", broken, origin, first, out);
    expect(out).toEqual([
      "SIM11 f (at 0): EXECUTION_STARTED differs from c's EXECUTION_STARTED at 0",
      'SIM11 f (at 1): meta.forkedFrom is undefined, not {"executionId":"c","seq":1}',
      "SIM11 f (at 2): marked as copied after the fork point 1",
    ]);
  });

  it("SIM9: a fork that takes its origin's message from its own stream, as if it were its origin", () => {
    // The fork's copy of m0 is marked; it then takes m1 as message 1 of a stream that has one.
    const log = forkOf();
    const taking = [
      ...log.slice(0, 2),
      { ...take("f", 2, 1, "m1"), executionId: "f" },
      event("f", 3, "EXECUTION_COMPLETED", { output: { received: 2, sum: 1 } }),
    ];
    const view: ChainView = {
      chainId: "f",
      logs: [taking],
      messages: [
        { ...sent(0, "m0"), chainId: "f" },
        { ...sent(1, "m1"), chainId: "f" },
      ],
    };
    const out: string[] = [];
    checkChain(view, new Map(), out);
    expect(out).toEqual(["SIM9 f (at 2): took message 1, skipping 0"]);
  });
});

/** Hand-made logs of a parent and its children, for the children's invariants alone. */
const childStart = (parent: string, key: string, detached = false) =>
  event(`${parent}::${key}#0`, 0, "EXECUTION_STARTED", {
    ...start,
    flow: "sim-child",
    parent: { executionId: parent, callId: `${key}#0`, detached },
  });
const spawned = (id: string, seq: number, key: string, detached = false) =>
  event(id, seq, "CHILD_STARTED", {
    callId: `${key}#0`,
    scope: "",
    name: key,
    childId: `${id}::${key}#0`,
    flow: "sim-child",
    detached,
  });
const awaiting = (id: string, seq: number, childId: string) =>
  event(id, seq, "SUSPENDED", { callId: "awaitChild#0", scope: "", name: "awaitChild", childId });
const childDone = (id: string, seq: number, childId: string, outcome: Json) =>
  event(id, seq, "CHILD_DONE", { childId, outcome });
const cancelled = (id: string, seq: number, reason: Json) =>
  event(id, seq, "EXECUTION_CANCELLED", {
    reason,
    error: { name: "CancelledError", code: "LOOM_CANCELLED", message: "cancelled" },
  });
const one = (chainId: string, ...logs: Envelope[][]): ChainView => ({
  chainId,
  logs,
  messages: [],
});

describe("the children's invariants report a broken tree (SIM12..SIM15)", () => {
  const parent = [event("p", 0, "EXECUTION_STARTED", start), spawned("p", 1, "k")];
  const child = [childStart("p", "k"), event("p::k#0", 1, "EXECUTION_COMPLETED", { output: 3 })];

  it("pass a child spawned, ended and settled as its parent's log says", () => {
    const out: string[] = [];
    const settled = [...parent, childDone("p", 2, "p::k#0", { status: "completed", output: 3 })];
    checkChildStart(one("p::k#0", child), settled, out);
    checkSlots(one("p", settled), out);
    checkChildDone("p", settled[2]!, one("p::k#0", child), out);
    checkQuiesced(
      new Map([
        ["p", settled],
        ["p::k#0", child],
      ]),
      [],
      out,
    );
    expect(out).toEqual([]);
  });

  it("SIM12: a child whose parent has no CHILD_STARTED for it, or another one", () => {
    const out: string[] = [];
    checkChildStart(one("p::k#0", child), parent.slice(0, 1), out);
    checkChildStart(one("p::k#0", child), [parent[0]!, spawned("p", 1, "k", true)], out);
    expect(out).toEqual([
      "SIM12 p::k#0: its parent p has no CHILD_STARTED for it",
      "SIM12 p::k#0: its parent link (call k#0, detached false) is not p's CHILD_STARTED at 1 (call k#0, detached true)",
    ]);
  });

  it("SIM13: a successor settles a slot its predecessor settled, or settles it otherwise", () => {
    const ok = { status: "completed", output: 3 };
    const first = [
      event("c", 0, "EXECUTION_STARTED", start),
      spawned("c", 1, "k"),
      awaiting("c", 2, "c::k#0"),
      childDone("c", 3, "c::k#0", ok),
      continued("c", 4, 1),
    ];
    const again = [generation(1), childDone("c~1", 1, "c::k#0", ok)];
    const out: string[] = [];
    checkSlots(one("c", first, again), out);
    expect(out).toEqual(["SIM13 c~1 (at 1): settles the slot of c::k#0 again (c (at 3) did)"]);
    // A successor that awaits the child from its carry may record it, but not otherwise.
    const failed = { status: "failed", error: { name: "Error", message: "no" } };
    const other = [
      generation(1),
      awaiting("c~1", 1, "c::k#0"),
      childDone("c~1", 2, "c::k#0", failed),
    ];
    const differs: string[] = [];
    checkSlots(one("c", first, other), differs);
    expect(differs).toEqual([
      'SIM13 c~1 (at 2): c::k#0 settled {"error":{"code":"LOOM_CHILD","message":"no","name":"Error"},"status":"failed"}, but c (at 3) said {"output":3,"status":"completed"}',
    ]);
  });

  it("SIM14: an attached child left running by its cancelled parent, a detached one cascaded, a wait never settled, a wake row left", () => {
    const gone = [...parent, cancelled("p", 2, "simulated operator")];
    const parked = [
      childStart("p", "k"),
      event("p::k#0", 1, "SUSPENDED", { callId: "suspend#0", scope: "", name: "suspend" }),
    ];
    const done = [event("q", 0, "EXECUTION_STARTED", start), spawned("q", 1, "d", true)];
    const detached = [
      childStart("q", "d", true),
      cancelled("q::d#0", 1, { kind: "cascade", parent: "q" }),
    ];
    const waiting = [
      event("w", 0, "EXECUTION_STARTED", start),
      spawned("w", 1, "k"),
      awaiting("w", 2, "w::k#0"),
    ];
    const ended = [childStart("w", "k"), event("w::k#0", 1, "EXECUTION_COMPLETED", { output: 1 })];
    const logs = new Map([
      ["p", gone],
      ["p::k#0", parked],
      ["q", [...done, event("q", 2, "EXECUTION_COMPLETED", { output: 0 })]],
      ["q::d#0", detached],
      ["w", waiting],
      ["w::k#0", ended],
    ]);
    const out: string[] = [];
    checkQuiesced(logs, [{ executionId: "w", timerId: "child:w::k#0" }], out);
    expect(out).toEqual([
      "SIM14 p::k#0: an attached child of p, which ended cancelled, is still parked (p::k#0)",
      "SIM14 q::d#0: a detached child, cancelled by a cascade from q",
      "SIM14 w: still waits on w::k#0, which ended completed: its slot was never settled",
      "SIM14 w: the wake row child:w::k#0 is left after everything ended",
    ]);
  });

  it("SIM15: a CHILD_DONE that says otherwise than the child's head, or that it ended while it runs", () => {
    const said = childDone("p", 2, "p::k#0", { status: "completed", output: 2 });
    const out: string[] = [];
    checkChildDone("p", said, one("p::k#0", child), out);
    checkChildDone("p", said, one("p::k#0", child.slice(0, 1)), out);
    // Cancelled in its start-to-commit window: the CHILD_DONE may carry generation 0's cancel.
    const windowed = [childStart("p", "k"), cancelled("p::k#0", 1, "simulated operator")];
    const closed = [
      event("p::k#0~1", 0, "EXECUTION_STARTED", {
        ...start,
        chainId: "p::k#0",
        generation: 1,
        continuedFrom: { executionId: "p::k#0", carried: {} },
      }),
      event("p::k#0~1", 1, "EXECUTION_CANCELLED", {
        reason: { kind: "cascade", parent: "p::k#0" },
        error: { name: "CancelledError", code: "LOOM_CANCELLED", message: "its predecessor" },
      }),
    ];
    const error = { name: "CancelledError", code: "LOOM_CANCELLED", message: "cancelled" };
    const ok = childDone("p", 2, "p::k#0", { status: "cancelled", error });
    checkChildDone("p", ok, one("p::k#0", windowed, closed), out);
    expect(out).toEqual([
      "SIM15 p (at 2): CHILD_DONE's output is not the output of p::k#0's head p::k#0",
      "SIM15 p (at 2): CHILD_DONE says completed, but p::k#0's head p::k#0 is pending",
    ]);
  });
});

describe("the fleet's invariant reports two owners under one lease (SIM16)", () => {
  const appended = (id: string, fence: number) => ({
    executionId: id,
    events: [],
    expectedSeq: 1,
    fence,
    status: "running" as const,
  });

  it("passes fences that only move on, each one process's", () => {
    const out: string[] = [];
    const log = [
      event("a", 0, "EXECUTION_STARTED", start),
      { ...event("a", 1, "STEP_STARTED", {}), meta: { fence: 1 } },
      { ...event("a", 2, "RESUMED", {}), meta: { fence: 3 } },
      { ...event("a", 3, "RESUMED", {}), meta: { fence: 3 } },
    ];
    checkFences("a", log, out);
    const owners = new FenceOwners();
    owners.record("process-0", [appended("a", 1)], [{ ok: true }], out);
    owners.record(
      "process-1",
      [appended("a", 2), appended("b", 1)],
      [{ ok: true }, { ok: true }],
      out,
    );
    owners.record("process-1", [appended("a", 2)], [{ ok: true }], out);
    expect(out).toEqual([]);
  });

  it("reports a fence that goes back in a log, and two processes appending under one fence", () => {
    const out: string[] = [];
    const log = [
      { ...event("a", 0, "EXECUTION_STARTED", start), meta: { fence: 2 } },
      { ...event("a", 1, "STEP_STARTED", {}), meta: { fence: 1 } },
    ];
    checkFences("a", log, out);
    const owners = new FenceOwners();
    owners.record("process-0", [appended("a", 2)], [{ ok: true }], out);
    const refused = { ok: false as const, error: new FencedError("stale fence") };
    // A refused batch appended nothing: it is no owner's.
    owners.record("process-2", [appended("a", 2)], [refused], out);
    owners.record("process-1", [appended("a", 2)], [{ ok: true }], out);
    expect(out).toEqual([
      "SIM16 a: STEP_STARTED at 1 appended under fence 1 after 2",
      "SIM16 a: process-1 appended under fence 2, which process-0 appended under",
    ]);
  });
});

/**
 * Hand-made logs of a parent "b" with a budget of 40 tokens, its child "b::k#0" granted 20, and a
 * fork "f" of "b" at its sequence 1, with what their attempts really spent.
 */
describe("the budget invariant on real spend reports a tree that spent past it (SIM4)", () => {
  const metered = (id: string, seq: number, tokens: number, estimated = false) =>
    event(id, seq, "RESOURCE_METERED", {
      callId: `work#${seq}`,
      delta: { tokens: { input: tokens }, ...(estimated ? { estimated: true } : {}) },
      ...(estimated ? { estimated: "crashed-attempt" } : {}),
    });
  const b = [
    event("b", 0, "EXECUTION_STARTED", { ...start, budget: { tokens: 40 } }),
    metered("b", 1, 20),
    event("b", 2, "CHILD_STARTED", {
      callId: "k#0",
      scope: "",
      name: "k",
      childId: "b::k#0",
      flow: "sim-child",
      detached: false,
      budget: { tokens: 20 },
      granted: true,
    }),
    childDone("b", 3, "b::k#0", { status: "completed", resources: { tokens: { input: 15 } } }),
  ];
  const parent = { executionId: "b", chainId: "b", callId: "k#0", detached: false, granted: true };
  const k = [
    event("b::k#0", 0, "EXECUTION_STARTED", { ...start, budget: { tokens: 20 }, parent }),
    metered("b::k#0", 1, 15),
  ];
  const f = [
    ...b.slice(0, 2).map((e) => ({
      ...e,
      executionId: "f",
      meta: { forkedFrom: { executionId: "b", seq: 1 } },
    })),
    metered("f", 2, 10),
  ];
  const violations = (spent: Record<string, number>) => {
    const real = new RealSpend();
    for (const [id, tokens] of Object.entries(spent)) real.spend(id, tokens);
    const out: string[] = [];
    checkSpend(new Map(Object.entries({ b, "b::k#0": k, f })), real, out);
    return out;
  };

  it("passes a tree within its budget plus one reservation, and a fork that starts from its prefix", () => {
    // b: 20 + its child's 25 (10 of them in an attempt the child's log never recorded) + 20.
    expect(violations({ b: 40, "b::k#0": 25, f: 40 })).toEqual([]);
  });

  it("reports a tree past its bound, a fork past it from its carry, and a record of more than was spent", () => {
    expect(violations({ b: 50, "b::k#0": 25, f: 60, g: 5 })).toEqual([
      "SIM4 g: spent 5 tokens, and has no log",
      "SIM4 b: its tree really spent 75 tokens, budget 40, bound 70",
      "SIM4 f: its tree really spent 60 tokens, and carried 20 from its fork point, budget 40, bound 70",
    ]);
    expect(violations({ b: 20, "b::k#0": 14, f: 10 })).toEqual([
      "SIM4 b::k#0: recorded 15 tokens as measured, its attempts really spent 14",
    ]);
  });

  it("does not count a crashed attempt's charge as measured, nor a fork's copies", () => {
    const charged = [...k, metered("b::k#0", 2, 30, true)];
    const out: string[] = [];
    const real = new RealSpend();
    real.spend("b::k#0", 15);
    real.spend("f", 10);
    checkSpend(new Map(Object.entries({ "b::k#0": charged, f })), real, out);
    expect(out).toEqual([]);
  });
});
