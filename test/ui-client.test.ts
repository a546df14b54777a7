/**
 * The dashboard client's pure modules, in Node (no DOM): formatting (format.ts C1..C4) and the
 * hash router (router.ts U1..U3); and the bundle the package serves (bundle.ts B2).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { formatUsd as cliUsd } from "../src/analytics/numbers.ts";
import { bundleClient } from "../src/ui/bundle.ts";
import { APP_CSS } from "../src/ui/assets/styles.ts";
import { EXECUTION_STATUSES, TERMINAL_STATUSES } from "../src/kernel/events.ts";
import {
  fmtAgo,
  fmtAmount,
  fmtDuration,
  fmtTime,
  formatUsd,
  isTerminal,
  meterText,
  parseJsonText,
  statusClass,
  statusMeaning,
  STATUSES,
} from "../src/ui/client/format.ts";
import {
  emptyFilters,
  listHash,
  listQuery,
  parseRoute,
  toggleSort,
  type ListFilters,
} from "../src/ui/client/router.ts";

const root = join(import.meta.dirname, "..");

describe("format.ts", () => {
  it("C1: a cost prints as loom show prints it, four significant digits and its currency", () => {
    expect(formatUsd).toBe(cliUsd);
    expect(fmtAmount("costUsd", 0.0008399999999999999)).toBe("$0.00084");
    expect(fmtAmount("costUsd", 1234.5678)).toBe("$1,235");
    expect(meterText({ dimension: "costUsd", spent: 0.01234567, limit: 0.05 })).toBe(
      "$0.01235 of $0.05",
    );
    expect(
      meterText({ dimension: "costUsd", spent: 0.5, limit: 1, costUnknown: true, exceeded: true }),
    ).toBe("≥ $0.5 (some calls could not be priced) of $1 — exceeded");
  });

  it("C2: durations in ms, s, min and h", () => {
    expect(fmtDuration(12.4)).toBe("12 ms");
    expect(fmtDuration(1500)).toBe("1.50 s");
    expect(fmtDuration(42_000)).toBe("42.0 s");
    expect(fmtDuration(125_000)).toBe("2 min 5 s");
    expect(fmtDuration(2 * 3_600_000 + 60_000)).toBe("2 h 1 min");
    expect(fmtDuration(undefined)).toBe("-");
    expect(fmtAgo(10_000, 13_400)).toBe("3 s ago");
    expect(fmtAgo(10_000, 10_200)).toBe("just now");
    expect(fmtAgo(20_000, 16_000)).toBe("in 4 s");
  });

  it("C3: a time in the given zone with the zone named, its ISO form apart; none is -", () => {
    const ms = Date.UTC(2026, 11, 4, 8, 36, 27);
    expect(fmtTime(ms, "UTC")).toEqual({
      text: "2026-12-04 08:36:27 UTC",
      iso: "2026-12-04T08:36:27.000Z",
    });
    expect(fmtTime(ms, "America/New_York").text).toBe("2026-12-04 03:36:27 EST");
    expect(fmtTime(undefined)).toEqual({ text: "-", iso: "" });
    expect(fmtTime(0)).toEqual({ text: "-", iso: "" });
  });

  it("C4: every status has its own class; failed, cancelled and refused are three", () => {
    const classes = STATUSES.map((s) => statusClass(s));
    expect(new Set(classes).size).toBe(STATUSES.length);
    const failed = statusClass("failed", "LOOM_STEP_FAILED");
    const refused = statusClass("failed", "LOOM_QUOTA_EXCEEDED");
    const cancelled = statusClass("cancelled");
    expect(new Set([failed, refused, cancelled]).size).toBe(3);
    expect(refused).toBe("failed refused");
    expect(statusClass("<img src=x>")).toBe("unknown");
    // Issue 26: queued is a status of its own, with a colour of its own in the styles.
    expect(statusClass("queued")).toBe("queued");
    expect(APP_CSS).toMatch(/\.badge\.queued \{ color: var\(--queued\)/);
  });

  it("C4, E5: the dashboard knows every status the kernel has, each with a colour and its end", () => {
    expect([...STATUSES]).toEqual([...EXECUTION_STATUSES]);
    for (const s of STATUSES) {
      expect(APP_CSS, s).toContain(`.badge.${s} { color: var(--${s})`);
      expect(APP_CSS, s).toMatch(new RegExp(`--${s}: #[0-9a-f]{6}`));
      expect(isTerminal(s), s).toBe(TERMINAL_STATUSES.has(s));
    }
    expect(isTerminal("unknown")).toBe(false);
    // analytics/statuses.ts S1: each says what it means (a badge's title), in words of its own.
    const meanings = STATUSES.map((st) => statusMeaning(st));
    for (const m of meanings) expect(m).toMatch(/^[a-z].{8,}$/);
    expect(new Set(meanings).size).toBe(STATUSES.length);
    expect(statusMeaning("<img src=x>")).toBeUndefined();
  });

  it("says what is wrong with JSON typed in a form, and takes empty text as nothing", () => {
    expect(parseJsonText(' {"a": 1} ', "The payload")).toEqual({ ok: true, value: { a: 1 } });
    expect(parseJsonText("  ", "The payload")).toEqual({ ok: true, value: undefined });
    const bad = parseJsonText("{a: 1}", "The payload");
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.message).toMatch(/^The payload is not JSON: /);
  });
});

describe("router.ts", () => {
  it("U1: an execution (its id decoded, / included), schedules, fleet, else the list", () => {
    expect(parseRoute("#/x/a%2Fb%3A%3Ak%230")).toEqual({ page: "execution", id: "a/b::k#0" });
    expect(parseRoute("#/x/%E0%A4%A")).toEqual({ page: "execution", id: "%E0%A4%A" });
    expect(parseRoute("#/schedules")).toEqual({ page: "schedules" });
    expect(parseRoute("#/fleet")).toEqual({ page: "fleet" });
    expect(parseRoute("#/flow-control")).toEqual({ page: "flow-control" });
    expect(parseRoute("")).toEqual({ page: "list", filters: emptyFilters() });
    expect(parseRoute("#/nowhere")).toEqual({ page: "list", filters: emptyFilters() });
  });

  it("U2: the list's filters, sort and cursor round-trip through the hash; junk is dropped", () => {
    const f: ListFilters = {
      status: ["failed", "cancelled"],
      flow: "agent & co",
      q: "run-00",
      principal: "alice",
      minCostUsd: 0.25,
      createdFromMs: 1_700_000_000_000,
      createdToMs: 1_800_000_000_000,
      sort: "cost",
      order: "desc",
      after: "opaque+/=cursor",
    };
    expect(parseRoute(listHash(f))).toEqual({ page: "list", filters: f });
    expect(listHash(emptyFilters())).toBe("#/");
    const junk = parseRoute("#/?status=failed,bogus&sort=evil&order=up&minCostUsd=abc");
    expect(junk).toEqual({ page: "list", filters: { ...emptyFilters(), status: ["failed"] } });
    const once = toggleSort({ ...f, after: "x" }, "cost");
    expect(once).toMatchObject({ sort: "cost", order: "asc", after: "" });
    expect(toggleSort(once, "cost").order).toBe("desc");
    expect(toggleSort(once, "id")).toMatchObject({ sort: "id", order: "asc" });
  });

  it("U3: the API is asked for exactly the hash's filters, by its parameter names", () => {
    const f: ListFilters = {
      ...emptyFilters(),
      status: ["running"],
      principal: "bob",
      minCostUsd: 1,
      createdFromMs: 5,
      sort: "updated",
      order: "asc",
      after: "c/1",
    };
    const q = new URL(listQuery(f, 50), "http://x").searchParams;
    expect(Object.fromEntries(q)).toEqual({
      status: "running",
      principal: "bob",
      minCostUsd: "1",
      createdFromMs: "5",
      sort: "updated",
      order: "asc",
      after: "c/1",
      limit: "50",
    });
  });
});

describe("bundle.ts", () => {
  it("B2: the package serves the bundle scripts/build.mjs wrote beside it, the same as the sources' (dist/ is fresh: test/support/build-dist.ts)", async () => {
    const dist = (await import(
      pathToFileURL(join(root, "dist", "ui", "bundle.js")).href
    )) as typeof import("../src/ui/bundle.ts");
    const served = await dist.clientScript();
    expect(served).toBe(readFileSync(join(root, "dist", "ui", "client", "app.js"), "utf8"));
    const entry = join(root, "src", "ui", "client", "main.ts");
    expect(served).toBe((await bundleClient(entry)).js);
    const map = JSON.parse(
      readFileSync(join(root, "dist", "ui", "client", "app.js.map"), "utf8"),
    ) as {
      sources: string[];
    };
    expect(map.sources).toContain("../../../src/ui/client/main.ts");
    expect(served).not.toContain("sourceMappingURL");
  });
});
