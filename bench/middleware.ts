/**
 * `npm run bench -- middleware [--effects 5000] [--rounds 5]`: the per-effect cost of the default
 * effect middleware chain (retry, budget admission, metering) beside a bare effect, in the same
 * run.
 *
 * One flow runs N `ctx.execute` calls of an effect that meters a few tokens, on the memory store
 * (so the figure is the kernel's, not a disk's), once with `middleware: []` and once with the
 * default chain and a budget it never reaches; rounds alternate and the summary compares
 * medians. Target: the chain adds at most 20 µs per effect.
 */
import { createRuntime, flow$, memoryStore, step$ } from "../src/index.ts";
import { emit, intFlag, median, note, parseFlags } from "./lib.ts";

const metered = step$("llm", async (n: number, ectx) => {
  ectx.meter({ tokens: { input: 3, output: 5 } });
  return n;
});

async function perEffectUs(effects: number, chain: boolean): Promise<number> {
  const f = flow$(
    "effects",
    async (ctx) => {
      let sum = 0;
      for (let i = 0; i < effects; i++) sum += await ctx.execute(metered, i);
      return sum;
    },
    chain ? { budget: { tokens: 1e12 } } : {},
  );
  const runtime = createRuntime({
    store: memoryStore(),
    background: false,
    ...(chain ? {} : { middleware: [] }),
  });
  const t0 = performance.now();
  await (await runtime.start(f, null)).result();
  const us = ((performance.now() - t0) * 1000) / effects;
  await runtime.close();
  return us;
}

export async function middlewareBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["effects", "rounds"]);
  const effects = intFlag(flags, "effects", 5000);
  const rounds = intFlag(flags, "rounds", 5);
  note(`middleware: ${effects} effects, ${rounds} rounds, warming up`);
  await perEffectUs(1000, false);
  await perEffectUs(1000, true);
  const bare: number[] = [];
  const chain: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    bare.push(await perEffectUs(effects, false));
    chain.push(await perEffectUs(effects, true));
    emit({
      name: "middleware",
      phase: "round",
      round,
      bareUs: round2(bare.at(-1)),
      chainUs: round2(chain.at(-1)),
    });
  }
  const bareUs = median(bare);
  const chainUs = median(chain);
  emit({
    name: "middleware",
    effects,
    rounds,
    bareUs: round2(bareUs),
    chainUs: round2(chainUs),
    addedUs: round2(chainUs - bareUs),
    ratio: round2(chainUs / bareUs),
    target: "addedUs <= 20",
    pass: chainUs - bareUs <= 20,
  });
}

function round2(x: number | undefined): number {
  return Math.round((x ?? 0) * 100) / 100;
}
