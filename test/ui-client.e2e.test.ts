/**
 * The TypeScript client (src/ui/client/) in Debian's Chromium driven by playwright-core: the
 * list's filters and sort in the hash (router.ts U2, U3), a new execution and a status change
 * appearing in the list without a reload (list-page.ts), distinct colours for failed, cancelled
 * and refused (format.ts C4), costs and times for people (C1, C3), the actions that apply and
 * none on a read-only page (server.ts S5), a call's panel opened by keyboard, and pages whose
 * endpoint may not be there yet degrading to the error the API answered. The last test draws
 * answers typed by api-types.ts (a StepDetail with its conversation, actions, lineage, a
 * MadeExecution) through the browser's network layer, so the client's rendering of the new
 * endpoints is checked here while their server side lands from other branches. Screenshots go to
 * test-artifacts/ui/. Chromium missing is a failure, not a skip: CI installs it.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, flow$, step$, type Runtime } from "../src/index.ts";
import { formatUsd } from "../src/analytics/numbers.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { startUiServer, type UiServer } from "../src/ui/server.ts";
import type { MadeExecution, StepDetail } from "../src/ui/api-types.ts";
import { until } from "./helpers.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = join(import.meta.dirname, "..", "test-artifacts", "ui");
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"];
const PRICES = [0.0003, 0.00054];

/** The page's window, as far as this test reads it (the tests compile without the DOM lib). */
interface Styled {
  getComputedStyle(el: unknown): { color: string };
}

const priced = step$("priced", async (usd: number, ectx) => {
  ectx.meter({ costUsd: usd });
  return usd;
});
const spends = flow$(
  "spends",
  async (ctx, n: number) => {
    for (const usd of PRICES) await ctx.execute(priced, usd);
    return n * 2;
  },
  { budget: { costUsd: 1 } },
);
const boom = flow$("boom", async (ctx) =>
  ctx.run("explode", async () => {
    throw new Error("boom");
  }),
);
const wait = flow$("wait", async (ctx) => ctx.suspend({ timeout: 600_000 }));
const over = step$("over", async (_: null, ectx) => {
  ectx.meter({ tokens: { input: 5, output: 5 } });
  return "words";
});
const greedy = flow$(
  "greedy",
  async (ctx) => {
    await ctx.execute(over, null);
    await ctx.execute(over, null);
  },
  { budget: { tokens: 8 } },
);

describe("the TypeScript dashboard client in Chromium (issue 25)", () => {
  let dir: string;
  let runtime: Runtime;
  let ui: UiServer;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];
  const asked: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`Chromium is not installed at ${CHROMIUM} (apt-get install chromium)`);
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "loom-ui-client-"));
    runtime = createRuntime({ store: sqliteStore(join(dir, "ui.db")) });
    for (const f of [spends, boom, wait, greedy]) runtime.registerFlow(f);
    await (await runtime.start(spends, 21, { id: "a-spends" })).result();
    await (await runtime.start(boom, null, { id: "b-boom" })).result();
    await (await runtime.start(greedy, null, { id: "c-greedy" })).result();
    await runtime.start(wait, null, { id: "d-cancelled" });
    await runtime.cancel("d-cancelled", "test");
    await runtime.start(wait, null, { id: "e-waits" });
    ui = await startUiServer({ runtime, port: 0 });
    context = await chromium.launchPersistentContext(join(dir, "profile"), {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: { width: 1280, height: 900 },
      timezoneId: "Europe/Paris",
      locale: "en-US",
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("console", (m) => {
      // A 404 of an endpoint this branch lacks is logged by the browser; the page shows it.
      if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) {
        problems.push(`console error: ${m.text()}`);
      }
    });
    page.on("request", (r) => asked.push(r.url()));
    await page.goto(`${ui.signInUrl}#/`);
  });

  afterAll(async () => {
    await context?.close();
    await ui?.close();
    await runtime?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const rowIds = async (): Promise<(string | null)[]> => {
    const rows = page.locator("[data-testid=execution-row]");
    const ids: (string | null)[] = [];
    for (let i = 0; i < (await rows.count()); i++)
      ids.push(await rows.nth(i).getAttribute("data-id"));
    return ids;
  };

  it("U2, U3: the hash filters the list; a sort click writes the hash and asks the API for it", async () => {
    await page.goto(`${ui.url}/#/?flow=wait`);
    await until(async () => (await rowIds()).length === 2);
    expect(await rowIds()).toEqual(["d-cancelled", "e-waits"]);
    expect(await page.locator("[data-testid=filter-flow]").inputValue()).toBe("wait");
    await page.goto(`${ui.url}/#/?status=failed`);
    await until(async () => (await rowIds()).join() === "b-boom,c-greedy");
    await page.locator("[data-testid=sort-cost]").click();
    await page.waitForURL(/sort=cost&order=asc/);
    expect(page.url()).toContain("status=failed");
    await page.locator("[data-testid=sort-cost]").click();
    await page.waitForURL(/sort=cost&order=desc/);
    const th = page.locator("th", { has: page.locator("[data-testid=sort-cost]") });
    expect(await th.getAttribute("aria-sort")).toBe("descending");
    await until(() =>
      asked.some((u) => /\/api\/executions\?status=failed&sort=cost&order=desc/.test(u)),
    );
    expect(problems).toEqual([]);
  });

  it("a new execution appears and a status changes in the list without a reload", async () => {
    await page.goto(`${ui.url}/#/`);
    await until(async () => (await rowIds()).length === 5);
    await page.evaluate("window.stillTheSamePage = true");
    await runtime.start(spends, 1, { id: "f-new" });
    await page.locator("[data-testid=execution-row][data-id=f-new]").waitFor();
    const waits = page.locator(
      "[data-testid=execution-row][data-id=e-waits] [data-testid=row-status]",
    );
    expect(await waits.textContent()).toBe("parked");
    await runtime.cancel("e-waits", "from the test");
    await page
      .locator("[data-testid=execution-row][data-id=e-waits] [data-testid=row-status]", {
        hasText: /^cancelled$/,
      })
      .waitFor();
    expect(await page.evaluate("window.stillTheSamePage")).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, "client-list.png"), fullPage: true });
    expect(problems).toEqual([]);
  });

  it("C4: failed, cancelled and refused have distinct colours, and say so in words", async () => {
    const colourOf = async (
      id: string,
    ): Promise<{ text: string; colour: string; status: string }> => {
      await page.goto(`${ui.url}/#/x/${id}`);
      const badge = page.locator("[data-testid=status]");
      await page.locator("[data-testid=status][data-status]:not(.live)").waitFor();
      return {
        text: (await badge.textContent()) ?? "",
        status: (await badge.getAttribute("data-status")) ?? "",
        colour: await badge.evaluate(
          (el) => (globalThis as unknown as Styled).getComputedStyle(el).color,
        ),
      };
    };
    const failed = await colourOf("b-boom");
    const refused = await colourOf("c-greedy");
    expect(await page.locator("[data-testid=refused]").isVisible()).toBe(true);
    const cancelled = await colourOf("d-cancelled");
    expect([failed.text, refused.text, cancelled.text]).toEqual(["failed", "failed", "cancelled"]);
    expect([failed.status, refused.status, cancelled.status]).toEqual([
      "failed",
      "refused",
      "cancelled",
    ]);
    expect(new Set([failed.colour, refused.colour, cancelled.colour]).size).toBe(3);
    await page.goto(`${ui.url}/#/?flow=wait`);
    const row = (id: string) =>
      page.locator(`[data-testid=execution-row][data-id=${id}] [data-testid=row-status]`);
    await row("d-cancelled").waitFor();
    expect(await row("d-cancelled").getAttribute("class")).toContain("cancelled");
    expect(problems).toEqual([]);
  });

  it("C1, C3: a cost to four significant digits with its currency; local times with the zone, ISO on hover", async () => {
    await page.goto(`${ui.url}/#/x/a-spends`);
    const cost = page.locator("[data-testid=resource][data-dimension=costUsd]");
    await cost.waitFor();
    const sum = PRICES.reduce((a, b) => a + b, 0);
    expect(await cost.textContent()).toContain(`${formatUsd(sum)} of $1`);
    expect(await cost.textContent()).not.toMatch(/\d{6}/);
    expect(await page.locator("[data-testid=output]").textContent()).toBe("42");
    expect(await page.locator("[data-testid=input]").textContent()).toBe("21");
    const started = page.locator(".facts time").first();
    expect(await started.textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\+1$/);
    const iso = (await started.getAttribute("title")) ?? "";
    expect(iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(new Date(iso).getTime()).toBe((await runtime.getState("a-spends")).startedAt);
    await page.screenshot({ path: join(ARTIFACTS, "client-execution.png"), fullPage: true });
    expect(problems).toEqual([]);
  });

  it("an ended execution shows no cancel, resume or send, and no form on its first screen", async () => {
    await page.goto(`${ui.url}/#/x/a-spends`);
    // What still applies to an ended run (a fork at a step) is a button that opens its form.
    await page.locator("[data-testid=fork]").waitFor();
    for (const action of ["cancel", "resume", "send"]) {
      expect(await page.locator(`[data-testid=${action}]`).isVisible(), action).toBe(false);
    }
    expect(await page.locator("textarea, input[type=text]").count()).toBe(0);
    expect(problems).toEqual([]);
  });

  it("a call opens by keyboard to its panel: the call's detail, or the error the API answered", async () => {
    await page.goto(`${ui.url}/#/x/a-spends`);
    const bar = page.locator("[data-testid=step-bar]").first();
    await bar.waitFor();
    await bar.focus();
    await page.keyboard.press("Enter");
    const panel = page.locator("[data-testid=step-panel]");
    await panel.locator("[data-testid=step-input], [data-testid=error]").first().waitFor();
    expect(await panel.getAttribute("data-call-id")).toBe(await bar.getAttribute("data-call-id"));
    await panel.locator("[data-testid=step-close]").click();
    expect(await panel.isVisible()).toBe(false);
    expect(problems).toEqual([]);
  });

  it("the schedules and fleet pages show their table or the error the API answered, from the nav", async () => {
    for (const [nav, table] of [
      ["schedules", "schedules"],
      ["fleet", "fleet"],
    ] as const) {
      await page.locator(`[data-nav=${nav}]`).click();
      await page.locator(`[data-testid=${table}], [data-testid=error]`).first().waitFor();
      expect(await page.locator(`[data-nav=${nav}]`).getAttribute("aria-current")).toBe("page");
    }
    expect(problems).toEqual([]);
  });

  it("S5: a read-only page draws no action button, even for a running execution", async () => {
    await runtime.start(wait, null, { id: "g-parked" });
    const readOnly = await startUiServer({ runtime, port: 0, readOnly: true });
    try {
      await page.goto(`${readOnly.signInUrl}#/x/g-parked`);
      await page.locator("[data-testid=read-only]").waitFor();
      await page.locator("[data-testid=status]", { hasText: "parked" }).waitFor();
      for (const action of ["cancel", "resume", "send", "fork", "rerun", "confirm"]) {
        expect(await page.locator(`[data-testid=${action}]`).count(), action).toBe(0);
      }
      expect(await page.locator("textarea, input[type=text], input[type=number]").count()).toBe(0);
      expect(problems).toEqual([]);
    } finally {
      await readOnly.close();
    }
  });

  it("draws a call, its conversation, lineage and the fork form from answers shaped by api-types.ts; a fork lands on what it made", async () => {
    const id = "a-spends";
    const step: StepDetail = {
      callId: "priced#0",
      kind: "step",
      name: "priced",
      scope: "",
      status: "completed",
      input: { q: "<img src=x onerror=alert(1)>" },
      output: 2,
      attempts: [
        {
          attempt: 1,
          durationMs: 12,
          error: { name: "E", code: "LOOM_X", message: "first failed" },
        },
        { attempt: 2, durationMs: 5 },
      ],
      metering: { costUsd: 0.0008399999999999999, tokens: { input: 10, output: 4 } },
      taint: [{ where: "input", path: "q", source: "web" }],
      sealed: true,
      seqs: [1, 2],
      forkAt: 0,
      llm: {
        model: "m1",
        system: "be brief",
        messages: [
          { role: "user", content: "<b>hi</b>" },
          { role: "assistant", content: "", toolCalls: [{ id: "t1", name: "search", input: {} }] },
          { role: "tool", toolCallId: "t1", content: "found" },
        ],
        answer: { text: "hello", toolCalls: [], stopReason: "end_turn" },
        usage: { inputTokens: 10, outputTokens: 4, cacheReadTokens: 3, cacheWriteTokens: 0 },
        price: { usd: 0.0008399999999999999, source: "genai-prices" },
        severed: "the tokens budget",
      },
    };
    // A runtime on a test clock starts near 0: its deadline span is larger than its start.
    const made: MadeExecution = {
      executionId: "b-boom",
      startedAtMs: 5_000,
      deadlineMs: 60_000,
      budget: { costUsd: 2 },
      spent: {},
    };
    const forks: unknown[] = [];
    await page.route(`**/api/executions/${id}`, async (route) => {
      const res = await route.fetch();
      const body = (await res.json()) as Record<string, unknown>;
      body.actions = { cancel: false, resume: false, send: false, fork: true, rerun: true };
      body.lineage = { forks: [{ executionId: "b-boom", seq: 2 }], parent: "c-greedy" };
      await route.fulfill({ response: res, json: body });
    });
    await page.route(`**/api/executions/${id}/call?*`, (route) => route.fulfill({ json: step }));
    await page.route(`**/api/executions/${id}/fork`, async (route) => {
      forks.push(route.request().postDataJSON());
      await route.fulfill({ json: made });
    });
    try {
      await page.goto(`${ui.url}/#/x/${id}`);
      await page.locator("[data-testid=forked-as] a", { hasText: "b-boom" }).waitFor();
      expect(await page.locator("[data-testid=parent] a").getAttribute("href")).toBe(
        "#/x/c-greedy",
      );
      const visible = await page.locator("[data-testid=actions] button:visible").allTextContents();
      expect(visible).toEqual(["Fork…", "Rerun…"]);
      await page.locator("[data-testid=step-bar]").first().click();
      const panel = page.locator("[data-testid=step-panel]");
      await panel.locator("[data-testid=conversation]").waitFor();
      expect(await panel.locator("[data-testid=message]").count()).toBe(3);
      expect(await panel.locator("[data-testid=message][data-role=user]").textContent()).toContain(
        "<b>hi</b>",
      );
      expect(await panel.locator("b, img").count()).toBe(0);
      expect(await panel.locator("[data-testid=answer]").textContent()).toContain("hello");
      expect(await panel.locator("[data-testid=severed]").textContent()).toContain(
        "severed by budget",
      );
      expect(await panel.locator("[data-testid=llm-usage]").textContent()).toBe(
        "10 tokens in, 4 out, cache 3 read / 0 written, price $0.00084 (genai-prices)",
      );
      expect(await panel.locator("[data-testid=sealed]").count()).toBe(1);
      expect(await panel.locator("[data-testid=attempt]").count()).toBe(2);
      expect(await panel.locator("[data-testid=taint]").textContent()).toBe("input q: from web");
      await page.screenshot({ path: join(ARTIFACTS, "client-llm-call.png"), fullPage: true });
      await panel.locator("[data-testid=fork-here]").click();
      expect(await page.locator("[data-testid=fork-at]").inputValue()).toBe("0");
      await page.locator("[data-testid=fork-budget]").fill("{costUsd: 2}");
      await page.locator("[data-testid=fork-form] [data-testid=confirm]").click();
      expect(await page.locator("[data-testid=form-message]").textContent()).toMatch(
        /^The budget is not JSON: /,
      );
      expect(forks).toEqual([]);
      await page.locator("[data-testid=fork-budget]").fill('{"costUsd": 2}');
      await page.locator("[data-testid=fork-form] [data-testid=confirm]").click();
      await page.locator("[data-testid=made]").waitFor();
      expect(page.url()).toMatch(/#\/x\/b-boom$/);
      expect(forks).toEqual([{ atSequence: 0, keepDeadline: false, budget: { costUsd: 2 } }]);
      expect(await page.locator("[data-testid=made]").textContent()).toContain(
        "budget: costUsd $2",
      );
      const times = page.locator("[data-testid=made] time");
      expect(await times.first().getAttribute("title")).toBe("1970-01-01T00:00:05.000Z");
      // deadlineMs counts from startedAtMs (api-types.ts MadeExecution), whatever their sizes.
      expect(await times.nth(1).getAttribute("title")).toBe("1970-01-01T00:01:05.000Z");
      expect(await page.locator("[data-testid=made]").textContent()).toContain(
        "(1 min 0 s after its start)",
      );
      expect(problems).toEqual([]);
    } finally {
      await page.unrouteAll();
    }
  });
});
