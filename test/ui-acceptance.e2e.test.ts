/**
 * Issue 25's acceptance in Debian's Chromium (playwright-core) against the real dashboard: one
 * SQLite store, a runtime with its background loop (it heartbeats as a fleet member and fires
 * schedules), the flows registered on it, and startUiServer on it. The LLM call is the real
 * Anthropic provider effect speaking to the fake provider server (src/testing/fake-anthropic.ts),
 * which streams the SDK's wire format. Each test asserts what a person sees: a call's input,
 * output and price; an LLM call's messages, streamed answer and tokens; a fork that lands on the
 * new execution and the lineage both ways; a new execution appearing in the open list; a
 * schedule's next occurrence and its pause; this runtime in the fleet with a lease it holds.
 * Screenshots go to test-artifacts/ui/ (list.png, execution-llm-call.png, fleet.png), which
 * docs/ui.md shows from docs/images/ui/. Chromium missing is a failure, not a skip.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cron } from "croner";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, flow$, step$, type Runtime } from "../src/index.ts";
import { formatUsd } from "../src/analytics/numbers.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { fakeAnthropic, type FakeAnthropic } from "../src/testing/index.ts";
import { startUiServer, type UiServer } from "../src/ui/server.ts";
import type { FleetAnswer, SchedulesAnswer } from "../src/ui/api-types.ts";
import { slow, until } from "./helpers.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = join(import.meta.dirname, "..", "test-artifacts", "ui");
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"];
const ANSWER = "Tides rise and fall twice a day, pulled by the moon.";
const SYSTEM = "You answer in one sentence.";
const QUESTION = "Why are there tides?";
const PRICE = 0.0125;
const CRON = "0 * * * *";
const ZONE = "Europe/Paris";

const priced = step$("lookup", async (topic: string, ectx) => {
  ectx.meter({ costUsd: PRICE });
  return { topic, sources: ["almanac"] };
});

let release = (): void => {};
const gate = new Promise<void>((resolve) => (release = resolve));
const parks = flow$("parks", async (ctx) => ctx.run("long", async () => gate.then(() => "done")));
const tick = flow$("tick", async () => "tock");

describe("issue 25 acceptance: the dashboard in Chromium on a real runtime", () => {
  let dir: string;
  let fake: FakeAnthropic;
  let runtime: Runtime;
  let ui: UiServer;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`Chromium is not installed at ${CHROMIUM} (apt-get install chromium)`);
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "loom-ui-accept-"));
    fake = await fakeAnthropic({ text: ANSWER, inputTokens: 24, deltaChars: 6 });
    const llm = anthropicEffect({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      baseURL: fake.baseURL,
    });
    const asks = flow$("asks", async (ctx, topic: string) => {
      const facts = await ctx.execute(priced, topic);
      const reply = await ctx.execute(llm, {
        system: SYSTEM,
        messages: [{ role: "user" as const, content: QUESTION }],
      });
      return { facts, reply: reply.text };
    });
    runtime = createRuntime({
      store: sqliteStore(join(dir, "ui.db")),
      heartbeatMs: 200,
      pollIntervalMs: 50,
    });
    for (const f of [asks, parks, tick]) runtime.registerFlow(f);
    await (await runtime.start(asks, "tides", { id: "asks-1" })).result();
    ui = await startUiServer({ runtime, port: 0 });
    context = await chromium.launchPersistentContext(join(dir, "profile"), {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: { width: 1280, height: 800 },
      timezoneId: ZONE,
      locale: "en-US",
    });
    context.setDefaultTimeout(slow(10_000));
    page = context.pages()[0] ?? (await context.newPage());
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(`console error: ${m.text()}`);
    });
    await page.goto(`${ui.signInUrl}#/`);
  });

  afterAll(async () => {
    release();
    await context?.close();
    await ui?.close();
    await runtime?.close();
    await fake?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${ui.url}${path}`, {
      headers: { authorization: `Bearer ${ui.token}` },
    });
    expect(res.status).toBe(200);
    return (await res.json()) as T;
  };

  const openCall = async (id: string, name: string) => {
    await page.goto(`${ui.url}/#/x/${id}`);
    const bar = page.locator(`[data-testid=step-bar][data-call-id="${name}#0"]`);
    await bar.click();
    const panel = page.locator(`[data-testid=step-panel][data-call-id="${name}#0"]`);
    await panel.locator("[data-testid=step-input]").waitFor();
    return panel;
  };

  it("a step opens from its bar to its input, its output and its price", async () => {
    const panel = await openCall("asks-1", "lookup");
    expect(await panel.locator("[data-testid=step-input]").textContent()).toContain("tides");
    const output = (await panel.locator("[data-testid=step-output]").textContent()) ?? "";
    expect(output).toContain("almanac");
    expect(await panel.locator("[data-testid=metering]").textContent()).toContain(
      `costUsd ${formatUsd(PRICE)}`,
    );
    expect(problems).toEqual([]);
  });

  it("an LLM call opens to its system and user messages, the streamed answer and its tokens", async () => {
    const panel = await openCall("asks-1", "llm");
    const talk = panel.locator("[data-testid=conversation]");
    await talk.waitFor();
    expect(await talk.locator("[data-testid=system]").textContent()).toContain(SYSTEM);
    expect(await talk.locator("[data-testid=message][data-role=user]").textContent()).toContain(
      QUESTION,
    );
    // The fake streamed the answer in six-character deltas: the page shows it whole.
    expect(fake.requests[0]?.deltasTotal).toBeGreaterThan(1);
    expect(await talk.locator("[data-testid=answer]").textContent()).toContain(ANSWER);
    const usage = (await talk.locator("[data-testid=llm-usage]").textContent()) ?? "";
    expect(usage).toMatch(/^24 tokens in, [1-9]\d* out/);
    expect(usage).toMatch(/price \$/);
    // The picture shows the open call: the panel scrolled to the top of the viewport.
    await page.evaluate(
      'document.querySelector("[data-testid=step-panel]").scrollIntoView({ block: "start" })',
    );
    await page.screenshot({ path: join(ARTIFACTS, "execution-llm-call.png") });
    expect(problems).toEqual([]);
  });

  it("a fork before a call lands on the new execution, and each page names the other", async () => {
    const panel = await openCall("asks-1", "llm");
    await panel.locator("[data-testid=fork-here]").click();
    const form = page.locator("[data-testid=fork-form]");
    await form.waitFor();
    await page.locator("[data-testid=fork-id]").fill("asks-1-fork");
    await form.locator("[data-testid=confirm]").click();
    await page.waitForURL(/#\/x\/asks-1-fork$/);
    const from = page.locator("[data-testid=forked-from]");
    await from.waitFor();
    expect(await from.locator("a").textContent()).toBe("asks-1");
    // The fork re-ran the LLM call against the provider and completed.
    await page.locator("[data-testid=status][data-status=completed]").waitFor();
    await page.locator("[data-testid=forked-from] a").click();
    await page.waitForURL(/#\/x\/asks-1$/);
    const as = page.locator("[data-testid=forked-as] a");
    await as.waitFor();
    expect(await as.textContent()).toBe("asks-1-fork");
    expect(problems).toEqual([]);
  });

  it("a new execution appears in the open list without a reload", async () => {
    await page.goto(`${ui.url}/#/`);
    await page.locator("[data-testid=execution-row][data-id=asks-1]").waitFor();
    await page.evaluate("window.stillTheSamePage = true");
    await (await runtime.start(tick, null, { id: "tick-now" })).result();
    await page
      .locator("[data-testid=execution-row][data-id=tick-now][data-status=completed]")
      .waitFor({ timeout: slow(15_000) });
    expect(await page.evaluate("window.stillTheSamePage")).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, "list.png") });
    expect(problems).toEqual([]);
  });

  it("a schedule shows its next occurrence, and pauses from the page", async () => {
    await runtime.schedule(tick, { cron: CRON, timezone: ZONE, name: "hourly" });
    const answer = await api<SchedulesAnswer>("/api/schedules");
    const next = answer.schedules.find((s) => s.name === "hourly")?.next[0] ?? 0;
    expect(next).toBeGreaterThan(answer.nowMs);
    const expected = new Cron(CRON, { timezone: ZONE }).nextRun(new Date(answer.nowMs));
    expect(next).toBe(expected?.getTime());
    await page.locator("[data-nav=schedules]").click();
    const row = page.locator("[data-testid=schedule-row][data-name=hourly]");
    await row.waitFor();
    expect(await row.getAttribute("data-paused")).toBe("false");
    const first = row.locator("[data-testid=schedule-next] time").first();
    expect(await first.getAttribute("datetime")).toBe(new Date(next).toISOString());
    // Shown in the browser's zone (Europe/Paris), on the hour.
    expect(await first.textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:00:00 GMT\+\d$/);
    await row.locator("[data-testid=schedule-pause]").click();
    await page.locator("[data-testid=schedule-row][data-name=hourly][data-paused=true]").waitFor();
    expect(await row.locator("[data-testid=schedule-next]").textContent()).toBe("paused");
    await row.locator("[data-testid=schedule-resume]").waitFor();
    expect((await runtime.schedules()).find((s) => s.name === "hourly")?.paused).toBe(true);
    expect(problems).toEqual([]);
  });

  it("the fleet shows this runtime with a recent heartbeat and the lease it holds", async () => {
    await runtime.start(parks, null, { id: "parks-1" });
    await until(async () => (await runtime.getState("parks-1")).inFlight === 1);
    const mine = (await runtime.fleet()).members.map((m) => m.owner);
    expect(mine).toHaveLength(1);
    const owner = mine[0] ?? "";
    expect((await api<FleetAnswer>("/api/fleet")).members.map((m) => m.owner)).toEqual([owner]);
    await page.locator("[data-nav=fleet]").click();
    const member = page.locator(`[data-testid=fleet-member][data-owner="${owner}"]`);
    await member.waitFor();
    // Heartbeats every 200 ms: the page (refetched every 3 s) says just now or seconds ago.
    expect(await member.locator("[data-testid=heartbeat]").textContent()).toMatch(
      /^(just now|\d+ s ago)$/,
    );
    await member.locator("[data-testid=lease]", { hasText: "parks-1" }).waitFor();
    expect(await member.locator("[data-testid=lease]").getAttribute("href")).toBe("#/x/parks-1");
    await page.screenshot({ path: join(ARTIFACTS, "fleet.png") });
    expect(problems).toEqual([]);
  });
});
