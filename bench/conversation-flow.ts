/**
 * The conversation bench's message loop and what its two modes share (conversation.ts, the body
 * kept live; conversation-uncached.ts, the body evicted before every resume).
 *
 * The loop is ADR 0109's: `for (;;) { msg = await ctx.suspend(); await ctx.run("turn", ...) }`,
 * returning `ctx.continueAsNew({ turn, summary })` after every `rotate` turns when it rotates.
 * Its step calls back into the bench (`Probe`): the moment it runs is the end of a resume.
 */
import { flow$ } from "../src/index.ts";
import { isTerminalEvent } from "../src/kernel/events.ts";
import type { Store } from "../src/store/spi.ts";
import { cpuMs, nowMs } from "./lib.ts";

export const CHAIN_ID = "bench-chat";

export interface Config {
  turns: number;
  /** Continue as new after every `rotate` turns; undefined: never. */
  rotate: number | undefined;
}

interface Carry {
  turn: number;
  summary: string;
}

export interface Probe {
  bodyRuns: number;
  /** When the body last started (a run or a replay), wall ms. */
  bodyAtMs: number;
  /** Per turn, when its step ran: wall ms and the process's CPU ms. */
  firedAtMs: Float64Array;
  firedCpuMs: Float64Array;
  waiting: { turn: number; resolve: () => void } | undefined;
}

export function newProbe(turns: number): Probe {
  return {
    bodyRuns: 0,
    bodyAtMs: NaN,
    firedAtMs: new Float64Array(turns + 1),
    firedCpuMs: new Float64Array(turns + 1),
    waiting: undefined,
  };
}

export function chatFlow(probe: Probe, rotate: number | undefined) {
  return flow$("bench-conversation", async (ctx, input: Carry | null) => {
    probe.bodyRuns++;
    probe.bodyAtMs = nowMs();
    for (;;) {
      const msg = await ctx.suspend<{ turn: number }>();
      const reply = await ctx.run("turn", async () => {
        probe.firedAtMs[msg.turn] = nowMs();
        probe.firedCpuMs[msg.turn] = cpuMs();
        if (probe.waiting?.turn === msg.turn) probe.waiting.resolve();
        return { turn: msg.turn, text: `reply to turn ${msg.turn}` };
      });
      if (rotate !== undefined && reply.turn % rotate === 0) {
        const summary = `${reply.turn} turns (from ${input?.turn ?? 0}); last: ${reply.text}`;
        return ctx.continueAsNew({ turn: reply.turn, summary });
      }
    }
  });
}

export const genId = (gen: number) => (gen === 0 ? CHAIN_ID : `${CHAIN_ID}~${gen}`);

/** The generation that holds turn `turn` (turns 1..R are generation 0). */
export const generationOf = (turn: number, rotate: number | undefined) =>
  rotate === undefined ? 0 : Math.floor((turn - 1) / rotate);

/** The last event of `id`'s log, or undefined for an empty log. */
export async function lastEvent(store: Store, id: string) {
  const head = await store.head(id);
  return head < 0 ? undefined : (await store.read(id, head, 1))[0];
}

/** Resolves once `id`'s log ends in EXECUTION_CONTINUED (point reads, once per event-loop turn). */
export async function continued(store: Store, id: string): Promise<void> {
  for (;;) {
    const last = await lastEvent(store, id);
    if (last?.kind === "EXECUTION_CONTINUED") return;
    if (last && isTerminalEvent(last)) throw new Error(`"${id}" ended ${last.kind}`);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
