/**
 * The dashboard end to end, in Debian's Chromium driven by playwright-core: the sign-in URL
 * (auth.ts A3), the list, a completed execution's timeline, a cancel from the page of a running
 * one, seen live, and a read-only server's page with no forms (server.ts S5). Screenshots go to
 * test-artifacts/ui/. Chromium missing is a failure, not a skip: CI installs it.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, flow$, step$, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { startUiServer, type UiServer } from "../src/ui/server.ts";
import { until } from "./helpers.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = join(import.meta.dirname, "..", "test-artifacts", "ui");
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-quic",
  "--disable-sync",
];

/** Three steps, then done. */
const three = flow$("three-steps", async (ctx) => {
  const a = await ctx.run("fetch", async () => 1);
  const b = await ctx.run("think", () => new Promise<number>((r) => setTimeout(() => r(2), 40)));
  const c = await ctx.run("answer", async () => 3);
  return a + b + c;
});

/** A step that runs for ten minutes unless its signal aborts. */
const long = flow$("long-step", async (ctx) =>
  ctx.run(
    "ten-minutes",
    ({ signal }) =>
      new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => resolve("slept"), 600_000);
        signal.addEventListener("abort", () => {
          clearTimeout(timer);
          reject(new Error("aborted"));
        });
      }),
  ),
);

/** A step, a sleep, then an LLM-like effect past its token budget: refused, so it fails. */
const llm = step$("llm", async (_: null, ectx) => {
  ectx.meter({ tokens: { input: 5, output: 3 } });
  return "words";
});
const spender = flow$(
  "spender",
  async (ctx) => {
    await ctx.run("plan", async () => "plan");
    await ctx.sleep(50);
    await ctx.execute(llm, null);
    await ctx.execute(llm, null);
  },
  { budget: { tokens: 8 } },
);

describe("the dashboard in Chromium (issue 11)", () => {
  let dir: string;
  let runtime: Runtime;
  let ui: UiServer;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `Chromium is not installed at ${CHROMIUM}: the dashboard's browser test needs it (apt-get install chromium; CI installs it)`,
      );
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "loom-ui-e2e-"));
    runtime = createRuntime({ store: sqliteStore(join(dir, "ui.db")) });
    runtime.registerFlow(three).registerFlow(long).registerFlow(spender);
    await (await runtime.start(three, null, { id: "done-3" })).result();
    await (await runtime.start(spender, null, { id: "over-budget" })).result();
    await runtime.start(long, null, { id: "live-1" });
    await until(async () =>
      (await runtime.readLog("live-1")).some((e) => e.kind === "STEP_STARTED"),
    );
    ui = await startUiServer({ runtime, port: 0 });
    context = await chromium.launchPersistentContext(join(dir, "profile"), {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: { width: 1280, height: 900 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(`console error: ${m.text()}`);
    });
  });

  afterAll(async () => {
    await context?.close();
    await ui?.close();
    await runtime?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("A1, A3: refuses the page without the token; the sign-in URL leaves a clean address and an HttpOnly, SameSite=Strict cookie", async () => {
    // In a page of its own: the browser logs the refused load, which is the point here.
    const stranger = await context.newPage();
    const refused = await stranger.goto(`${ui.url}/#/`);
    expect(refused?.status()).toBe(401);
    expect(await refused?.text()).toContain("LOOM_UNAUTHENTICATED");
    await stranger.close();
    const signedIn = await page.goto(`${ui.signInUrl}#/`);
    expect(signedIn?.status()).toBe(200);
    expect(page.url()).toBe(`${ui.url}/#/`);
    const cookies = await context.cookies(ui.url);
    expect(cookies).toEqual([
      expect.objectContaining({ value: ui.token, httpOnly: true, sameSite: "Strict" }),
    ]);
    expect(await page.evaluate("document.cookie")).toBe("");
  });

  it("lists the executions", async () => {
    await page.goto(`${ui.url}/#/`);
    const rows = page.locator("[data-testid=execution-row]");
    await rows.nth(2).waitFor();
    expect(await rows.count()).toBe(3);
    const ids: (string | null)[] = [];
    for (let i = 0; i < 3; i++) ids.push(await rows.nth(i).getAttribute("data-id"));
    expect(ids).toEqual(["done-3", "live-1", "over-budget"]);
    await page.screenshot({ path: join(ARTIFACTS, "list.png"), fullPage: true });
    expect(problems).toEqual([]);
  });

  it("shows a completed execution's three steps as three bars", async () => {
    await page.locator("[data-testid=execution-row] a", { hasText: "done-3" }).click();
    await page.locator("[data-testid=step-bar]").nth(2).waitFor();
    expect(await page.locator("[data-testid=step-bar]").count()).toBe(3);
    expect(await page.locator("[data-testid=status]").textContent()).toBe("completed");
    expect(await page.locator("[data-testid=event-row]").count()).toBe(
      (await runtime.readLog("done-3")).length,
    );
    await page.screenshot({ path: join(ARTIFACTS, "completed.png"), fullPage: true });
    expect(problems).toEqual([]);
  });

  it("shows a sleep as a wait bar, a refused quota as a marker, and tokens against the budget", async () => {
    await page.goto(`${ui.url}/#/x/over-budget`);
    await page.locator("[data-testid=marker][data-kind=QUOTA_EXCEEDED]").waitFor();
    expect(await page.locator("[data-testid=status]").textContent()).toBe("failed");
    expect(await page.locator("[data-testid=wait-bar][data-kind=sleep]").count()).toBe(1);
    expect(await page.locator("[data-testid=step-bar]").count()).toBe(3);
    const tokens = page.locator("[data-testid=resource][data-dimension=tokens]");
    expect(await tokens.textContent()).toContain("exceeded");
    await page.screenshot({ path: join(ARTIFACTS, "over-budget.png"), fullPage: true });
    expect(problems).toEqual([]);
  });

  it("cancels a running execution after a confirmation, and shows it cancelled live", async () => {
    await page.goto(`${ui.url}/#/x/live-1`);
    const status = page.locator("[data-testid=status]");
    await page.locator("[data-testid=step-bar][data-running=true]").waitFor();
    expect(await status.textContent()).toBe("running");
    await page.screenshot({ path: join(ARTIFACTS, "running.png"), fullPage: true });
    await page.locator("[data-testid=cancel]").click();
    // Nothing is sent before the confirmation.
    expect((await runtime.getState("live-1")).status).toBe("running");
    await page.locator("[data-testid=confirm]").click();
    await page.locator("[data-testid=status]", { hasText: /^cancelled$/ }).waitFor();
    const log = await runtime.readLog("live-1");
    expect(log.map((e) => e.kind)).toContain("EXECUTION_CANCELLED");
    await page.locator("[data-testid=marker][data-kind=EXECUTION_CANCELLED]").waitFor();
    await page.screenshot({ path: join(ARTIFACTS, "cancelled.png"), fullPage: true });
    expect(problems).toEqual([]);
  });

  it("S5: a read-only server's page shows the execution with no cancel, resume or send", async () => {
    const readOnly = await startUiServer({ runtime, port: 0, readOnly: true });
    try {
      await page.goto(`${readOnly.signInUrl}#/x/over-budget`);
      await page.locator("[data-testid=read-only]").waitFor();
      expect(await page.locator("[data-testid=status]").textContent()).toBe("failed");
      for (const action of ["cancel", "resume", "send"]) {
        expect(await page.locator(`[data-testid=${action}]`).count(), action).toBe(0);
      }
      expect(await page.locator("textarea, input[type=text]").count()).toBe(0);
      await page.screenshot({ path: join(ARTIFACTS, "read-only.png"), fullPage: true });
      expect(problems).toEqual([]);
    } finally {
      await readOnly.close();
    }
  });
});
