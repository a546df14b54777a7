/**
 * Issue 20, item 5: prices. What each test hunts for: a model the runtime's `prices` prices is
 * admitted under a cost budget and metered at that price, recorded as the runtime's (pricing.ts
 * B2); a bad table is refused when the runtime is made (kernel/prices.ts PR1..PR3); a call nothing
 * prices is metered `costUnknown`, and `loom show` and the dashboard say the cost is a lower
 * bound (B3, resources.ts Q5, resource-usage.ts U5); and every ending of a call is priced as
 * the model the provider said answered it, the price recorded with it (B1).
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  InvalidInputError,
  isLoomError,
  memoryStore,
  PRICE_SOURCE,
  step$,
  streamTokenBudget,
  type LlmResult,
  type ResourceDelta,
  type Runtime,
  type RuntimeOptions,
} from "../src/index.ts";
import { formatUsd } from "../src/analytics/numbers.ts";
import { costAt, type ModelPrice } from "../src/kernel/prices.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { openAiEffect } from "../src/providers/openai.ts";
import { OPTION_PRICE_SOURCE, RUNTIME_PRICE_SOURCE } from "../src/providers/pricing.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { fakeAnthropic, fakeOpenAi, type FakeAnthropicOptions } from "../src/testing/index.ts";
import type { UsageRow } from "../src/analytics/resource-usage.ts";
import { meterText } from "../src/ui/client/format.ts";
import { executionDetail } from "../src/ui/detail.ts";
import { loom, tempDirs } from "./fixtures/cli/spawn.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const tempDir = tempDirs("loom-pricing-");
const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

type FakeOptions = Pick<FakeAnthropicOptions, "text" | "deltaChars" | "deltaMs" | "errorAfter">;
interface EffectOptions {
  model: string;
  baseURL: string;
  price?: ModelPrice;
  guard?: ReturnType<typeof streamTokenBudget>;
}

/** Each provider's fake (answering as `model` when given) and effect. */
const PROVIDERS = [
  {
    name: "anthropic",
    fake: (o: FakeOptions & { model?: string }) => fakeAnthropic(o),
    effect: (o: EffectOptions) => anthropicEffect(o),
  },
  {
    name: "openai chat",
    fake: (o: FakeOptions & { model?: string }) => fakeOpenAi(o),
    effect: (o: EffectOptions) => openAiEffect(o),
  },
  {
    name: "openai responses",
    fake: (o: FakeOptions & { model?: string }) => fakeOpenAi(o),
    effect: (o: EffectOptions) => openAiEffect({ ...o, api: "responses" }),
  },
];
type Provider = (typeof PROVIDERS)[number];

async function fake(p: Provider, o: FakeOptions & { model?: string } = {}) {
  const s = await p.fake(o);
  servers.push(s);
  return s;
}

const ask = { messages: [{ role: "user" as const, content: "tell me about tides" }] };

/** The deltas of every RESOURCE_METERED of `id`, in order. */
async function metered(r: Runtime, id: string): Promise<ResourceDelta[]> {
  return (await r.readLog(id))
    .filter((e) => e.kind === "RESOURCE_METERED")
    .map((e) => (e.payload as unknown as { delta: ResourceDelta }).delta);
}

const cost = (price: ModelPrice, d: ResourceDelta) =>
  costAt(price, d.tokens?.input ?? 0, d.tokens?.output ?? 0);

describe("the runtime's prices (issue 20)", () => {
  for (const p of PROVIDERS) {
    it(`${p.name}: a model only the runtime's prices know is admitted under a cost budget and metered at that price, recorded as the runtime's (B2)`, async () => {
      const s = await fake(p, { text: "priced by the runtime" });
      const llm = p.effect({ model: "my-own-model-7", baseURL: s.baseURL });
      const price = { inputPerMTok: 2, outputPerMTok: 8 };
      const r = rt(memoryStore(), { prices: { "my-own-model-7": price } });
      const f = flow$("runtime-priced", async (ctx) => ctx.execute(llm, ask, { retry: false }));
      const out = await (await r.start(f, null, { id: "rp", budget: { costUsd: 1 } })).result();
      expect(out.status).toBe("completed");
      const [delta] = await metered(r, "rp");
      const usd = cost(price, delta ?? {});
      expect(usd).toBeGreaterThan(0);
      const source = RUNTIME_PRICE_SOURCE;
      expect(out.output?.price).toEqual({ usd, source, model: "my-own-model-7" });
      expect(delta).toMatchObject({ costUsd: usd, priced: { model: "my-own-model-7", source } });
      expect(delta?.costUnknown).toBeUndefined();
      expect((await r.getState("rp"))._resources).toMatchObject({ costUsd: usd });
    });
  }

  it("a call's own price wins over the runtime's, and the runtime's over the price data", async () => {
    const s = await fake(PROVIDERS[0] as Provider, { text: "whose price?" });
    const own = { inputPerMTok: 1, outputPerMTok: 1 };
    const table = { inputPerMTok: 1000, outputPerMTok: 1000 };
    const r = rt(memoryStore(), {
      prices: { "my-own-model-7": table, "claude-sonnet-4-6": table },
    });
    const plain = rt(memoryStore());
    const priceOf = async (runtime: Runtime, model: string, price?: ModelPrice) => {
      const llm = anthropicEffect({ model, baseURL: s.baseURL, ...(price ? { price } : {}) });
      const f = flow$(`whose-${model}-${price ? "own" : "none"}`, async (ctx) =>
        ctx.execute(llm, ask),
      );
      return (await (await runtime.start(f, null)).result()).output?.price;
    };
    expect((await priceOf(r, "my-own-model-7", own))?.source).toBe(OPTION_PRICE_SOURCE);
    const overData = await priceOf(r, "claude-sonnet-4-6");
    expect(overData?.source).toBe(RUNTIME_PRICE_SOURCE);
    // 11 input tokens and 3 output at the table's $1,000 per million each.
    expect(overData?.usd).toBeCloseTo((11 + 3) * 0.001, 12);
    expect((await priceOf(plain, "claude-sonnet-4-6"))?.source).toBe(PRICE_SOURCE);
  });

  it("PR1: a bad table is refused when the runtime is made, naming the bad entry; a bad price when the effect is made", () => {
    const bad: [unknown, RegExp][] = [
      [[], /^prices must be an object of \{ inputPerMTok, outputPerMTok \} by model name$/],
      ["cheap", /^prices must be an object/],
      [null, /^prices must be an object/],
      [{ m: 3 }, /^prices\["m"\] must be \{ inputPerMTok, outputPerMTok \}/],
      [{ m: { inputPerMTok: -1, outputPerMTok: 1 } }, /^prices\["m"\]\.inputPerMTok must be/],
      [{ m: { inputPerMTok: 1, outputPerMTok: NaN } }, /^prices\["m"\]\.outputPerMTok must be/],
      [{ m: { inputPerMTok: Infinity, outputPerMTok: 1 } }, /^prices\["m"\]\.inputPerMTok/],
      [{ m: { inputPerMTok: "1", outputPerMTok: 1 } }, /^prices\["m"\]\.inputPerMTok/],
      [{ ok: { inputPerMTok: 1, outputPerMTok: 1 }, m: { inputPerMTok: 1 } }, /\["m"\]\.output/],
      [{ "": { inputPerMTok: 1, outputPerMTok: 1 } }, /^prices names a model with an empty name/],
    ];
    for (const [prices, message] of bad) {
      const make = () =>
        createRuntime({ store: memoryStore(), prices: prices as RuntimeOptions["prices"] });
      expect(make, JSON.stringify(prices)).toThrow(InvalidInputError);
      expect(make, JSON.stringify(prices)).toThrow(message);
    }
    const price = { inputPerMTok: -0.5, outputPerMTok: 1 };
    expect(() => anthropicEffect({ model: "m", apiKey: "k", price })).toThrow(
      /^an LLM effect's price\.inputPerMTok must be a finite number >= 0/,
    );
  });

  it("PR2, PR3: a name the table only inherits prices nothing, and changing the table afterwards changes no price", async () => {
    const s = await fake(PROVIDERS[0] as Provider);
    const table: Record<string, ModelPrice> = {
      "my-own-model-7": { inputPerMTok: 2, outputPerMTok: 8 },
    };
    const r = rt(memoryStore(), { prices: table });
    delete table["my-own-model-7"];
    const outcome = async (model: string) => {
      const llm = anthropicEffect({ model, baseURL: s.baseURL });
      const f = flow$(`inherits-${model}`, async (ctx) =>
        ctx.execute(llm, ask, { retry: false }).then(
          (res) => res.price?.source ?? "no price",
          (e: unknown) => (isLoomError(e) ? e.code : "other"),
        ),
      );
      return (await (await r.start(f, null, { budget: { costUsd: 1 } })).result()).output;
    };
    for (const model of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      expect(await outcome(model), model).toBe("LOOM_PRICE_UNKNOWN");
    }
    expect(s.requests).toHaveLength(0);
    expect(await outcome("my-own-model-7")).toBe(RUNTIME_PRICE_SOURCE);
  });
});

describe("a cost that could not be priced (issue 20)", () => {
  it('B3, Q5: allowed by unpricedCost: "allow", it is metered costUnknown; loom show and the dashboard say the cost is a lower bound', async () => {
    const s = await fake(PROVIDERS[0] as Provider);
    const cwd = tempDir();
    const r = createRuntime({ store: sqliteStore(join(cwd, "loom.db")), unpricedCost: "allow" });
    const priced = anthropicEffect({ model: "claude-sonnet-4-6", baseURL: s.baseURL });
    const unknown = anthropicEffect({ model: "my-own-model-7", baseURL: s.baseURL });
    const f = flow$("half-priced", async (ctx) => {
      await ctx.execute(priced, ask);
      return (await ctx.execute(unknown, ask)).price ?? "no price";
    });
    try {
      const out = await (await r.start(f, null, { id: "hp", budget: { costUsd: 1 } })).result();
      expect(out.output).toBe("no price");
      const [first, second] = await metered(r, "hp");
      expect(first?.costUnknown).toBeUndefined();
      expect(second).toMatchObject({ costUnknown: true, tokens: { input: 11 } });
      expect(second?.costUsd).toBeUndefined();
      const usd = first?.costUsd ?? -1;
      expect((await r.getState("hp"))._resources).toMatchObject({
        costUsd: usd,
        costUnknown: true,
      });
      // The dashboard: its view model, and the words of the meter its client draws from it.
      const detail = await executionDetail(r, "hp");
      const row = detail.resources[0]?.rows.find((x) => x.dimension === "costUsd");
      expect(row).toMatchObject({ spent: usd, limit: 1, costUnknown: true });
      expect(meterText(row as UsageRow)).toContain(
        `≥ ${formatUsd(usd)} (some calls could not be priced) of $1`,
      );
      const rows = detail.timeline.filter((x) => x.kind === "RESOURCE_METERED");
      expect(rows[1]?.text).toMatch(/cost unknown \(could not be priced\)/);
      expect(rows[0]?.text).toContain(`${formatUsd(usd)} (claude-sonnet-4-6)`);
    } finally {
      await r.close();
    }
    const shown = await loom(cwd, "show", "hp");
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^cost\s+≥ \$\S+ \(some calls could not be priced\)$/m);
    expect(shown.stdout).toMatch(/RESOURCE_METERED\s+step llm#1 metered .*cost unknown/);
  });

  it("Q5: with no cost budget too; a priced call after it does not unmark the total", async () => {
    const s = await fake(PROVIDERS[1] as Provider);
    const unknown = openAiEffect({ model: "my-own-model-7", baseURL: s.baseURL });
    const priced = openAiEffect({ model: "gpt-4o", baseURL: s.baseURL });
    // An effect of one's own that names what it cannot price is marked by metering itself.
    const tool = { ...step$("tool", async () => 1), unpriced: () => "a tool with no price" };
    const f = flow$("marked", async (ctx) => {
      await ctx.execute(unknown, ask);
      await ctx.execute(priced, ask);
      return ctx.execute(tool, null);
    });
    const r = rt(memoryStore());
    expect((await (await r.start(f, null, { id: "mk" })).result()).status).toBe("completed");
    const [a, b, c] = await metered(r, "mk");
    expect(a?.costUnknown).toBe(true);
    expect(b?.costUnknown).toBeUndefined();
    expect(b?.costUsd).toBeGreaterThan(0);
    expect(c?.costUnknown).toBe(true);
    const spent = (await r.getState("mk"))._resources;
    expect(spent).toMatchObject({ costUsd: b?.costUsd, costUnknown: true });
  });
});

describe("one pricing basis for every ending (issue 20, B1)", () => {
  const ASKED = "asked-model";
  const SERVED = "served-model";
  const PRICES = {
    [ASKED]: { inputPerMTok: 1, outputPerMTok: 1 },
    [SERVED]: { inputPerMTok: 100, outputPerMTok: 300 },
  };
  const ENDINGS: {
    ending: string;
    fake: FakeOptions;
    guard?: true;
    timeoutMs?: number;
    cancel?: true;
  }[] = [
    { ending: "completed", fake: { text: "answered by the served model" } },
    { ending: "severed by its guard", fake: { text: "x".repeat(400) }, guard: true },
    { ending: "failed midway", fake: { text: "w".repeat(80), errorAfter: [3] } },
    {
      ending: "timed out",
      fake: { text: "t".repeat(4000), deltaChars: 4, deltaMs: 5 },
      timeoutMs: 150,
    },
    {
      ending: "cancelled",
      fake: { text: "y".repeat(4000), deltaChars: 4, deltaMs: 10 },
      cancel: true,
    },
  ];

  for (const p of PROVIDERS) {
    for (const e of ENDINGS) {
      it(`${p.name}, ${e.ending}: priced as the model the provider said answered, the price recorded`, async () => {
        const s = await fake(p, { ...e.fake, model: SERVED });
        const guard = e.guard ? { guard: streamTokenBudget(40) } : {};
        const llm = p.effect({ model: ASKED, baseURL: s.baseURL, ...guard });
        const timeout = e.timeoutMs === undefined ? {} : { timeoutMs: e.timeoutMs };
        const f = flow$("basis", async (ctx) =>
          ctx.execute(llm, ask, { retry: false, ...timeout }).then(
            (res: LlmResult) => res.price ?? null,
            (err: unknown) => (isLoomError(err) ? err.code : String(err)),
          ),
        );
        const r = rt(memoryStore(), { prices: PRICES });
        const h = await r.start(f, null, { id: "basis", budget: { costUsd: 10 } });
        if (e.cancel) {
          await until(() => (s.requests[0]?.deltasSent ?? 0) > 5, 5000);
          expect(await h.cancel("enough")).toBe(true);
        }
        const out = await h.result();
        const withTokens = (await metered(r, "basis")).filter((d) => d.tokens !== undefined);
        expect(withTokens).toHaveLength(1);
        const d = withTokens[0] ?? {};
        expect(d.priced).toEqual({ model: SERVED, source: RUNTIME_PRICE_SOURCE });
        expect(d.costUsd).toBeCloseTo(cost(PRICES[SERVED], d), 12);
        if (e.ending === "completed") {
          expect(out.output).toEqual({
            usd: d.costUsd,
            source: RUNTIME_PRICE_SOURCE,
            model: SERVED,
          });
        } else {
          expect(d.estimated).toBe(true);
        }
      });
    }
  }

  it("a provider answering as a model nothing prices does not make the call free: it is priced as the requested model, which admission found", async () => {
    const p = PROVIDERS[0] as Provider;
    for (const guard of [undefined, streamTokenBudget(40)]) {
      const s = await fake(p, { text: "z".repeat(400), model: "a-dated-model-nobody-prices" });
      const llm = p.effect({ model: ASKED, baseURL: s.baseURL, ...(guard ? { guard } : {}) });
      const f = flow$("fallback", async (ctx) =>
        ctx.execute(llm, ask, { retry: false }).catch(() => null),
      );
      const r = rt(memoryStore(), { prices: PRICES });
      await (await r.start(f, null, { id: "fb", budget: { costUsd: 10 } })).result();
      const [d] = await metered(r, "fb");
      expect(d?.costUnknown).toBeUndefined();
      expect(d?.priced).toEqual({ model: ASKED, source: RUNTIME_PRICE_SOURCE });
      expect(d?.costUsd).toBeCloseTo(cost(PRICES[ASKED], d ?? {}), 12);
      expect(d?.costUsd).toBeGreaterThan(0);
    }
  });
});

describe("priced reservations (issue 20, pricing.ts B4)", () => {
  for (const viaRuntime of [false, true]) {
    it(`parallel LLM calls under a cost budget each hold what their tokens may cost (${viaRuntime ? "the runtime's prices" : "the effect's price"}), so together they cannot pass it`, async () => {
      const s = await fake(PROVIDERS[0] as Provider, { text: "x".repeat(1600), deltaChars: 400 });
      // $0.001 a token: a call of "hi" and maxTokens 500 reserves 501 tokens, $0.501.
      const price = { inputPerMTok: 1000, outputPerMTok: 1000 };
      const llm = anthropicEffect({
        model: "my-own-model-7",
        baseURL: s.baseURL,
        ...(viaRuntime ? {} : { price }),
      });
      const r = rt(memoryStore(), viaRuntime ? { prices: { "my-own-model-7": price } } : {});
      const f = flow$("cost-fan", async (ctx) =>
        ctx.parallel(
          Array.from(
            { length: 8 },
            () => async (c: typeof ctx) =>
              c
                .execute(
                  llm,
                  { messages: [{ role: "user", content: "hi" }], maxTokens: 500 },
                  { retry: false },
                )
                .then((res) => res.price?.usd ?? 0)
                .catch(() => "refused" as const),
          ),
        ),
      );
      const budget = 1;
      const out = await (
        await r.start(f, null, { id: "cf", budget: { costUsd: budget } })
      ).result();
      const paid = (out.output ?? []).filter((x): x is number => typeof x === "number");
      const real = paid.reduce((a, b) => a + b, 0);
      expect(paid.length).toBeGreaterThan(0);
      expect(paid.length).toBeLessThan(8);
      expect(real).toBeLessThanOrEqual(budget + 0.501);
      const started = (await r.readLog("cf")).find((e) => e.kind === "STEP_STARTED");
      const reserved = (started?.payload as { reserved?: { delta?: ResourceDelta } }).reserved;
      expect(reserved?.delta?.costUsd).toBeCloseTo(0.501, 6);
    });
  }
});
