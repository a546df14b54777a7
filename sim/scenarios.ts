/**
 * Canonical scenarios crashed at every append (issue 5): each scenario runs once without a
 * fault, counting the owner's appends; then once per append and side (before it commits, after
 * it committed), with the owner's process crashing there and a fresh runtime recovering from the
 * store alone. Every run must end where the uncrashed run ended.
 *
 * On the simulated clock of the simulator, so a scenario's operator actions (a resume, a cancel)
 * land at the same simulated time in every run.
 */
import {
  createRuntime,
  flow$,
  step$,
  StepTimeoutError,
  type EffectContext,
  type Flow,
  type Runtime,
} from "../src/index.ts";
import { memoryStore } from "../src/store/memory/index.ts";
import { loadState } from "../src/runtime/load-state.ts";
import { callsOf } from "../src/fold/settled.ts";
import { routeToHead } from "../src/runtime/continuation.ts";
import type { Store } from "../src/store/spi.ts";
import { faultyStore, SimCrash, type CrashPoint } from "./faulty-store.ts";
import { Prng } from "./prng.ts";
import { withFakeClock } from "./fake-clock.ts";

export interface Scenario {
  name: string;
  flow: Flow;
  input: unknown;
  /** Operator actions at simulated times after the start. */
  actions: { atMs: number; act: (operator: Runtime, id: string) => Promise<unknown> }[];
  /**
   * What must match the uncrashed run (default: all of it). A cancel's end state is the same,
   * but how far the flow got before it depends on whether its process was down when it came.
   */
  compare?: (end: ScenarioEnd) => unknown;
  /** A chain (ADR 0109): `features.continueAsNew` on, and the end state is its head's. */
  chain?: boolean;
  /** Other flows the scenario's flow spawns (issue 8): registered on every runtime. */
  children?: Flow[];
}

export interface ScenarioEnd {
  status: string;
  output?: unknown;
  errorCode?: string;
  /** Each step's name and how it settled. */
  steps: Record<string, string>;
  /** The owner's appends (group commits), counted in a run without a crash. */
  appends: number;
  /** A chain's generations: for each, how many EXECUTION_CONTINUED its log holds. */
  generations?: number[];
  /** A chain's consumed messages (sequence numbers, duplicates apart), across generations. */
  consumed?: number[];
  /** Each spawned child's id and end, with how many times its work step ran to completion. */
  children?: Record<string, { status: string; output?: unknown; completedSteps: number }>;
}

const wait = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(new Error("aborted"));
    });
  });

const tenSteps = flow$("ten-steps", async (ctx) => {
  let sum = 0;
  for (let i = 0; i < 10; i++) {
    sum += await ctx.run(`s${i}`, async ({ signal }) => (await wait(10, signal), i));
  }
  return sum;
});

const suspendResume = flow$("suspend-resume", async (ctx) => {
  const before = await ctx.run("before", () => 1);
  const answer = await ctx.suspend<number>();
  return ctx.run("after", () => before + answer);
});

const slow = step$("slow", async (ms: number, ectx: EffectContext) => {
  await wait(ms, ectx.signal);
  return ms;
});

const cancelDuringStep = flow$("cancel-during-step", async (ctx) => {
  await ctx.run("first", () => 1);
  return ctx.execute(slow, 5000);
});

const stepTimeout = flow$("step-timeout", async (ctx) =>
  ctx
    .execute(slow, 10_000, { timeoutMs: 1000 })
    .catch((e: unknown) => (e instanceof StepTimeoutError ? "timed out" : "other")),
);

const flaky = step$("flaky", async (_: null, ectx: EffectContext) => {
  await wait(20, ectx.signal);
  if (ectx.attempt < 3) throw new Error(`attempt ${ectx.attempt} failed`);
  return "ok";
});

/** A conversation that continues after every two turns and ends after four (ADR 0109 D8). */
const conversation = flow$("conversation", async (ctx, input: { turn: number } | null) => {
  let turn = input?.turn ?? 0;
  for (;;) {
    const msg = await ctx.receive<string>();
    await ctx.run("reply", async ({ signal }) => (await wait(10, signal), msg.toUpperCase()));
    turn++;
    if (turn === 4) return { turn, last: msg };
    if (turn % 2 === 0) return ctx.continueAsNew({ turn });
  }
});

const retry = flow$("retry", async (ctx) =>
  ctx.execute(flaky, null, { retry: { initialDelayMs: 50, jitter: 0, maxAttempts: 5 } }),
);

/** A child that works for a while, then answers ten times its input. */
const kid = flow$("kid", async (ctx, n: number) =>
  ctx.run("work", async ({ signal }) => (await wait(30, signal), n * 10)),
);

/** A parent with two children, awaited in turn (issue 8). */
const twoChildren = flow$("two-children", async (ctx) => {
  const a = await ctx.spawn(kid, 1);
  const b = await ctx.spawn(kid, 2);
  return (await ctx.awaitChild<number>(a)) + (await ctx.awaitChild<number>(b));
});

export const SCENARIOS: Scenario[] = [
  { name: "a 10-step flow", flow: tenSteps, input: null, actions: [] },
  {
    name: "a suspend and a resume",
    flow: suspendResume,
    input: null,
    actions: [{ atMs: 300, act: (op, id) => op.resume(id, 41) }],
  },
  {
    name: "a cancel during a step",
    flow: cancelDuringStep,
    input: null,
    actions: [{ atMs: 400, act: (op, id) => op.cancel(id, "operator") }],
    compare: (end) => ({
      status: end.status,
      errorCode: end.errorCode,
      nothingInFlight: Object.values(end.steps).every((s) => s !== "started"),
    }),
  },
  { name: "a step timeout", flow: stepTimeout, input: null, actions: [] },
  { name: "a retry", flow: retry, input: null, actions: [] },
  {
    name: "ADR 0109 D8 (1): a two-generation conversation with a message in flight",
    flow: conversation,
    input: null,
    chain: true,
    actions: [
      { atMs: 100, act: (op, id) => op.send(id, "one", { key: "k1" }) },
      { atMs: 100, act: (op, id) => op.send(id, "two", { key: "k2" }) },
      // Sent while the first generation rotates: in flight across the start-to-commit window.
      { atMs: 150, act: (op, id) => op.send(id, "three", { key: "k3" }) },
      { atMs: 600, act: (op, id) => op.send(id, "four", { key: "k4" }) },
      // A sender's retry after the rotation: the carried dedupe window drops it.
      { atMs: 900, act: (op, id) => op.send(id, "one, retried", { key: "k1" }) },
    ],
  },
  {
    name: "issue 8: a parent with two children",
    flow: twoChildren,
    children: [kid],
    input: null,
    actions: [],
  },
];

export async function runScenario(s: Scenario, crash?: CrashPoint): Promise<ScenarioEnd> {
  return withFakeClock(({ now, tick }) => drive(s, crash, now, tick));
}

async function drive(
  s: Scenario,
  crash: CrashPoint | undefined,
  now: () => number,
  tick: (ms: number) => Promise<unknown>,
): Promise<ScenarioEnd> {
  const data = memoryStore();
  const clock = { now };
  const id = "scenario-1";
  const pending: Promise<unknown>[] = [];
  const spawn = (p: Promise<unknown>) => pending.push(p.catch(() => undefined));
  const held: { owner?: Runtime } = {};
  const none = {
    crash: 0,
    transient: 0,
    delay: 0,
    maxDelayMs: 0,
    dropAfterAck: 0,
    dropWake: 0,
    ignoreKeyConcurrency: 0,
    ignoreWindow: 0,
  };
  const first = faultyStore(
    data.reopen(),
    new Prng(1),
    none,
    () => void held.owner?.close(),
    crash,
  );
  const options = {
    clock,
    leaseTtlMs: 1000,
    pollIntervalMs: 50,
    noticePollMs: 20,
    closeStore: false,
    features: { continueAsNew: s.chain === true },
    // A simulated crash is the point; anything else is reported.
    onError: (e: Error) => {
      if (!(e instanceof SimCrash) && !/process is dead/.test(e.message)) console.error(e);
    },
  };
  const owner = createRuntime({ ...options, store: first.store, ownerId: "first" });
  for (const f of s.children ?? []) owner.registerFlow(f);
  owner.registerFlow(s.flow);
  held.owner = owner;
  const operator = createRuntime({
    ...options,
    store: data.reopen(),
    background: false,
    ownerId: "operator",
  });
  spawn(owner.start(s.flow, s.input, { id }));
  let recovered: Runtime | undefined;
  const actions = [...s.actions];
  for (let t = 0; t < 60_000; t += 10) {
    await tick(10);
    for (const a of actions.filter((x) => x.atMs <= t)) {
      actions.splice(actions.indexOf(a), 1);
      spawn(a.act(operator, id));
    }
    if (first.dead && !recovered) {
      recovered = createRuntime({ ...options, store: data.reopen(), ownerId: "second" });
      for (const f of s.children ?? []) recovered.registerFlow(f);
      recovered.registerFlow(s.flow);
      // A start that died before it committed failed at its caller, who starts it again (with
      // the same id, so a start that did commit is adopted, not doubled).
      spawn(recovered.start(s.flow, s.input, { id }));
    }
    const state = await loadState(data, await headOf(s, data, id));
    if (
      state &&
      ["completed", "failed", "cancelled"].includes(state.status) &&
      actions.length === 0
    )
      break;
  }
  const state = await loadState(data, await headOf(s, data, id));
  const steps: Record<string, string> = {};
  // Every call, kept as a frame or by its value alone (fold/settled.ts L4).
  for (const [, f] of state ? callsOf(state) : []) if (f.kind === "step") steps[f.name] = f.status;
  const end: ScenarioEnd = { status: state?.status ?? "missing", steps, appends: first.appends };
  if (state?.output !== undefined) end.output = state.output;
  if (state?.error) end.errorCode = state.error.code;
  if (s.chain) Object.assign(end, await chainEnd(data, id));
  if (s.children) end.children = await childrenEnd(data, state);
  for (const r of [owner, operator, recovered]) {
    if (!r) continue;
    let closed = false;
    void r.close().finally(() => (closed = true));
    for (let i = 0; i < 1000 && !closed; i++) await tick(10);
  }
  await Promise.all(pending);
  return end;
}

/** The id whose state ends the scenario: a chain's verified head, or the execution itself. */
async function headOf(s: Scenario, store: Store, id: string): Promise<string> {
  if (!s.chain || (await store.head(id)) < 0) return id;
  return routeToHead({ store, maxChainHops: 8 }, id);
}

/** A chain's generations and what they consumed, read from the store. */
async function chainEnd(
  store: Store,
  chainId: string,
): Promise<Pick<ScenarioEnd, "generations" | "consumed">> {
  const generations: number[] = [];
  const consumed: number[] = [];
  for (let n = 0; ; n++) {
    const log = await store.read(n === 0 ? chainId : `${chainId}~${n}`);
    if (log.length === 0) break;
    generations.push(log.filter((e) => e.kind === "EXECUTION_CONTINUED").length);
    for (const e of log) {
      const p = e.payload as { seq?: number; duplicate?: boolean };
      if (e.kind === "MESSAGE_CONSUMED" && p.duplicate !== true && p.seq !== undefined) {
        consumed.push(p.seq);
      }
    }
  }
  return { generations, consumed: consumed.sort((a, b) => a - b) };
}

/** Each child the parent's state records, as its own log ends (issue 8's crash criterion). */
async function childrenEnd(
  store: Store,
  parent: Awaited<ReturnType<typeof loadState>>,
): Promise<NonNullable<ScenarioEnd["children"]>> {
  const out: NonNullable<ScenarioEnd["children"]> = {};
  for (const childId of Object.keys(parent?._children ?? {})) {
    const state = await loadState(store, childId);
    const log = await store.read(childId);
    const row: { status: string; output?: unknown; completedSteps: number } = {
      status: state?.status ?? "missing",
      completedSteps: log.filter((e) => e.kind === "STEP_COMPLETED").length,
    };
    if (state?.output !== undefined) row.output = state.output;
    out[childId] = row;
  }
  return out;
}
