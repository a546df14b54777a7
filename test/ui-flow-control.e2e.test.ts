/**
 * What waits, on the dashboard, in Debian's Chromium driven by playwright-core (issue 26 item 4;
 * ui/flow-control.ts FC1, FC2, client/flow-control-page.ts, analytics/waits.ts W3): the Flow
 * control page lists queue fc's waiters in admission order with their positions and expected
 * waits, and limiter m's charges and its waiter; the list knows the `queued` status (a filter, a
 * colour of its own) and says where each row waits; an execution's page says it too. The
 * executions are test/support/waiting.ts's. Screenshots go to test-artifacts/ui/ (flow-control.png,
 * queued-list.png). Chromium missing is a failure, not a skip: CI installs it.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { startUiServer, type UiServer } from "../src/ui/server.ts";
import type { FlowControlAnswer } from "../src/ui/api-types.ts";
import { waitingExecutions, type Waiting } from "./support/waiting.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = join(import.meta.dirname, "..", "test-artifacts", "ui");
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"];

/** The page's window, as far as this test reads it (the tests compile without the DOM lib). */
interface Styled {
  getComputedStyle(el: unknown): { color: string };
}

describe("flow control on the dashboard (issue 26 item 4)", () => {
  let dir: string;
  let waiting: Waiting;
  let ui: UiServer;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`Chromium is not installed at ${CHROMIUM} (apt-get install chromium)`);
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "loom-ui-fc-"));
    waiting = await waitingExecutions(sqliteStore(join(dir, "ui.db")));
    ui = await startUiServer({ runtime: waiting.runtime, port: 0 });
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
    await page.goto(`${ui.signInUrl}#/`);
  });

  afterAll(async () => {
    await context?.close();
    await ui?.close();
    await waiting?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("FC1: GET /api/flow-control answers the runtime's queues and limiters", async () => {
    const res = await fetch(`${ui.url}/api/flow-control`, {
      headers: { Authorization: `Bearer ${ui.token}` },
    });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as FlowControlAnswer;
    expect(answer.queues).toEqual(await waiting.runtime.queues());
    expect(answer.limiters.map((l) => [l.name, l.waiting.map((w) => w.executionId)])).toEqual([
      ["m", ["ask-b"]],
    ]);
  });

  it("the Flow control page shows queue fc's waiters in order with positions and waits, and limiter m's waiter", async () => {
    await page.locator("nav a[data-nav=flow-control]").click();
    const fc = page.locator("[data-testid=queue][data-name=fc]");
    await fc.locator("[data-testid=queue-waiter]").nth(2).waitFor();
    const rows = fc.locator("[data-testid=queue-waiter]");
    const shown: (string | null)[][] = [];
    for (let i = 0; i < 3; i++) {
      const row = rows.nth(i);
      shown.push([
        await row.getAttribute("data-id"),
        await row.getAttribute("data-position"),
        await row.locator("[data-testid=expected]").textContent(),
      ]);
    }
    expect(shown).toEqual([
      ["q-5", "1", "~12 s"],
      ["q-3", "2", "~24 s"],
      ["q-4", "3", "~36 s"],
    ]);
    expect(await fc.textContent()).toContain("1 at once, 1 per key · 1 active (u1: 1) · 3 waiting");
    const m = page.locator("[data-testid=limiter][data-name=m]");
    expect(await m.locator("[data-testid=limiter-waiter]").getAttribute("data-id")).toBe("ask-b");
    expect(await m.textContent()).toContain("60 / 100");
    expect(await page.locator("nav a[aria-current=page]").textContent()).toBe("Flow control");
    await page.screenshot({ path: join(ARTIFACTS, "flow-control.png"), fullPage: true });
    expect(problems).toEqual([]);
  });

  it("FC2, C4: the list filters by queued, draws it in a colour of its own, and says where each row waits", async () => {
    await page.goto(`${ui.url}/#/`);
    await page.locator("input[name=status][value=queued]").check();
    await page.locator("[data-testid=filter-apply]").click();
    await page.locator("[data-testid=execution-row][data-id=q-3]").waitFor();
    const ids = await page
      .locator("[data-testid=execution-row]")
      .evaluateAll((rows) =>
        rows.map((r) => (r as unknown as { dataset: { id: string } }).dataset.id),
      );
    expect(ids).toEqual(["q-3", "q-4", "q-5"]);
    const q3 = page.locator("[data-testid=execution-row][data-id=q-3]");
    expect(await q3.locator("[data-testid=waiting]").textContent()).toBe(
      "waiting in queue fc (key u1) #2, ~24 s",
    );
    const colour = (id: string) =>
      page
        .locator(`[data-testid=execution-row][data-id=${id}] [data-testid=row-status]`)
        .evaluate((el) => (globalThis as unknown as Styled).getComputedStyle(el).color);
    await page.screenshot({ path: join(ARTIFACTS, "queued-list.png"), fullPage: true });
    // Every row of the whole list: a queued badge's colour is none of the others'.
    await page.goto(`${ui.url}/#/`);
    await page.locator("[data-testid=execution-row][data-id=ask-b]").waitFor();
    const others = new Set([await colour("run-2"), await colour("done-1")]);
    expect(others.has(await colour("q-3"))).toBe(false);
    const askB = page.locator("[data-testid=execution-row][data-id=ask-b] [data-testid=waiting]");
    expect(await askB.textContent()).toBe("waiting on limiter m #1, ~12 s");
    expect(
      await page
        .locator("[data-testid=execution-row][data-id=run-2] [data-testid=waiting]")
        .count(),
    ).toBe(0);
    expect(problems).toEqual([]);
  });

  it("D5: an execution's page says where it waits", async () => {
    await page.goto(`${ui.url}/#/x/q-4`);
    const why = page.locator("[data-testid=waiting]");
    await why.waitFor();
    expect(await why.textContent()).toBe("waiting in queue fc (key u2) #3, ~36 s");
    expect(await page.locator("[data-testid=status]").textContent()).toBe("queued");
    expect(problems).toEqual([]);
  });
});
