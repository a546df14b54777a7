/**
 * Issue 22 item 5, written as the exploits: the dashboard decrypted sealed payloads and took
 * writes from anyone who reached its port, loopback included (an agent's own shell tool, any
 * local user). Each test is the attack; auth.ts A1..A4, routes.ts P1..P3 and server.ts S1..S5
 * refuse it.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  aesGcmCodec,
  createRuntime,
  flow$,
  isLoomError,
  memoryStore,
  type Runtime,
} from "../src/index.ts";
import { MIN_TOKEN_LENGTH, readTokenFile, SIGN_IN_PATH } from "../src/ui/auth.ts";
import { UI_ROUTES, type Route } from "../src/ui/routes.ts";
import { startUiServer, type UiServer } from "../src/ui/server.ts";
import { until } from "./helpers.ts";

const SECRET = "card 4111-1111-1111-1111";

const gated = flow$("gated", async (ctx, input: { card: string }) => {
  const approval = await ctx.suspend<{ approved: boolean }>({ timeout: 3_600_000 });
  return ctx.run("pay", async () => (approval.approved ? `paid with ${input.card}` : "refused"));
});

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
});

async function sealedRuntime(): Promise<Runtime> {
  const codec = aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" });
  const runtime = createRuntime({ store: memoryStore(), codec, pollIntervalMs: 20 });
  runtime.registerFlow(gated);
  open.push(() => runtime.close());
  await runtime.start(gated, { card: SECRET }, { id: "pay-1" });
  await until(async () => (await runtime.getState("pay-1")).status === "parked");
  return runtime;
}

describe("the dashboard without its token (issue 22 item 5)", () => {
  it("A1: a local client without the token reads no sealed payload: 401 on the list, the page and the stream", async () => {
    const runtime = await sealedRuntime();
    const ui = await startUiServer({ runtime, port: 0 });
    open.push(() => ui.close());
    for (const path of ["/api/executions", "/api/executions/pay-1", "/api/executions/pay-1/live"]) {
      const res = await fetch(`${ui.url}${path}`);
      const text = await res.text();
      expect(res.status, path).toBe(401);
      expect(text, path).not.toContain("4111");
    }
  });

  it("A1: a local client without the token cannot approve a gated suspend by resuming it", async () => {
    const runtime = await sealedRuntime();
    const ui = await startUiServer({ runtime, port: 0 });
    open.push(() => ui.close());
    const res = await fetch(`${ui.url}/api/executions/pay-1/resume`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ payload: { approved: true } }),
    });
    expect(res.status).toBe(401);
    expect((await runtime.getState("pay-1")).status).toBe("parked");
    expect((await runtime.readLog("pay-1")).map((e) => e.kind)).not.toContain("RESUMED");
  });
});

/** Every method a route takes, and two it does not: an unknown method is refused 401 too (A1). */
const methodsOf = (r: Route): string[] => [...new Set([...r.methods, "GET", "POST", "DELETE"])];
/** A concrete path of a route, its `:id` an execution that exists. */
const pathOf = (r: Route, id = "pay-1"): string => r.path.replace(":id", encodeURIComponent(id));

/** A raw request, for a Host header fetch will not set. */
function raw(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

async function serve(opts: { readOnly?: boolean; token?: string } = {}): Promise<{
  runtime: Runtime;
  ui: UiServer;
}> {
  const runtime = await sealedRuntime();
  const ui = await startUiServer({ runtime, port: 0, ...opts });
  open.push(() => ui.close());
  return { runtime, ui };
}

/** The sign-in URL's answer, not followed (A3). */
async function signIn(url: string): Promise<Response> {
  return fetch(url, { redirect: "manual" });
}

describe("the token on every route (auth.ts A1, routes.ts P3)", () => {
  it("A1, P3: every route of the router, with every method, and paths outside it answer 401 without the token", async () => {
    const { ui } = await serve();
    const tried: string[] = [];
    for (const r of UI_ROUTES) {
      for (const method of methodsOf(r)) {
        const res = await fetch(`${ui.url}${pathOf(r)}`, {
          method,
          ...(method === "POST" ? { headers: { "content-type": "application/json" } } : {}),
          ...(method === "POST" ? { body: JSON.stringify({ payload: { approved: true } }) } : {}),
        });
        const text = await res.text();
        expect(res.status, `${method} ${r.path}`).toBe(401);
        expect(res.headers.get("www-authenticate"), r.path).toContain("Bearer");
        if (method !== "HEAD") expect(text, r.path).toContain("LOOM_UNAUTHENTICATED");
        expect(text).not.toContain("4111");
        tried.push(`${method} ${r.path}`);
      }
    }
    expect(tried).toContain("POST /api/executions/:id/resume");
    for (const path of ["/nothing", "/api/nothing", "/api/executions/pay-1/x/y", "/auth/x"]) {
      expect((await fetch(`${ui.url}${path}`)).status, path).toBe(401);
    }
  });

  it("A3: the sign-in URL sets an HttpOnly SameSite=Strict cookie and redirects to a URL without the token; then every route works", async () => {
    const { runtime, ui } = await serve();
    expect(ui.signInUrl).toBe(`${ui.url}${SIGN_IN_PATH}?token=${ui.token}`);
    const res = await signIn(ui.signInUrl);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/");
    const setCookie = res.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^loom_ui_\d+=/);
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Strict");
    const cookie = setCookie.split(";")[0] ?? "";
    for (const id of ["pay-2", "pay-3"]) {
      await runtime.start(gated, { card: SECRET }, { id });
      await until(async () => (await runtime.getState(id)).status === "parked");
    }
    // The schedule routes act on a schedule's name (ui/fleet-pages.ts).
    await runtime.schedule(gated, { cron: "0 3 * * *", name: "nightly" });
    const bodies: Record<string, unknown> = {
      cancel: { reason: "signed in" },
      resume: { payload: { approved: false } },
      send: { message: "hello" },
      fork: { atSequence: 0, newId: "pay-1-fork" },
      rerun: { newId: "pay-1-again" },
    };
    const queries: Record<string, string> = { "/api/executions/:id/call": "?call=suspend%230" };
    for (const r of UI_ROUTES) {
      const action = r.write === true ? (r.path.split("/").at(-1) ?? "") : "";
      const schedule = r.path.startsWith("/api/schedules/");
      const id = schedule ? "nightly" : ({ cancel: "pay-2", send: "pay-3" }[action] ?? "pay-1");
      const got = await fetch(`${ui.url}${pathOf(r, id)}${queries[r.path] ?? ""}`, {
        method: r.methods[0],
        redirect: "manual",
        headers: { cookie, "content-type": "application/json" },
        ...(r.write === true ? { body: JSON.stringify(bodies[action]) } : {}),
      });
      expect(got.status, r.path).toBeLessThan(400);
      await got.body?.cancel();
    }
    // The sign-in URL without a token, to a signed-in browser: a redirect that sets nothing.
    const again = await fetch(`${ui.url}${SIGN_IN_PATH}`, {
      redirect: "manual",
      headers: { cookie },
    });
    expect(again.status).toBe(303);
    expect(again.headers.get("set-cookie")).toBeNull();
    expect((await runtime.getState("pay-2")).status).toBe("cancelled");
    // The bearer form, for scripts.
    const bearer = await fetch(`${ui.url}/api/executions/pay-1`, {
      headers: { authorization: `Bearer ${ui.token}` },
    });
    expect(bearer.status).toBe(200);
  });

  it("A2: a wrong token is 401 in the cookie, the header and the sign-in URL, whatever its length; a sign-in with it sets nothing", async () => {
    const { runtime, ui } = await serve();
    const last = ui.token.at(-1) === "A" ? "B" : "A";
    const wrongs = [
      `${ui.token.slice(0, -1)}${last}`,
      ui.token.slice(0, -1),
      `${ui.token}x`,
      "x",
      "x".repeat(10_000),
      "",
    ];
    const port = new URL(ui.url).port;
    for (const wrong of wrongs) {
      const byQuery = await signIn(`${ui.url}${SIGN_IN_PATH}?token=${encodeURIComponent(wrong)}`);
      expect(byQuery.status).toBe(401);
      expect(byQuery.headers.get("set-cookie")).toBeNull();
      const headers: Record<string, string>[] = [
        { cookie: `loom_ui_${port}=${wrong}` },
        { authorization: `Bearer ${wrong}` },
      ];
      for (const h of headers) {
        const res = await fetch(`${ui.url}/api/executions/pay-1/resume`, {
          method: "POST",
          headers: { ...h, "content-type": "application/json" },
          body: JSON.stringify({ payload: { approved: true } }),
        });
        expect(res.status, JSON.stringify(h).slice(0, 80)).toBe(401);
      }
    }
    // The token in a query anywhere but the sign-in URL is not a sign-in.
    const elsewhere = await fetch(`${ui.url}/api/executions?token=${ui.token}`);
    expect(elsewhere.status).toBe(401);
    expect((await runtime.getState("pay-1")).status).toBe("parked");
  });

  it("A3: a cookie is one server's: another dashboard on the same host does not take it", async () => {
    const { ui } = await serve();
    const other = await serve();
    const cookie = ((await signIn(ui.signInUrl)).headers.get("set-cookie") ?? "").split(";")[0];
    const res = await fetch(`${other.ui.url}/api/executions`, {
      headers: { cookie: cookie ?? "" },
    });
    expect(res.status).toBe(401);
  });

  it("S2, S3: with the token, a rebound Host and a foreign Origin are still refused 403", async () => {
    const { runtime, ui } = await serve();
    const port = new URL(ui.url).port;
    const auth = { authorization: `Bearer ${ui.token}` };
    expect(await raw(`${ui.url}/api/executions`, { ...auth, host: `evil.example:${port}` })).toBe(
      403,
    );
    const cookie = ((await signIn(ui.signInUrl)).headers.get("set-cookie") ?? "").split(";")[0];
    const csrf = await fetch(`${ui.url}/api/executions/pay-1/resume`, {
      method: "POST",
      headers: {
        cookie: cookie ?? "",
        origin: "http://evil.example",
        "content-type": "application/json",
      },
      body: JSON.stringify({ payload: { approved: true } }),
    });
    expect(csrf.status).toBe(403);
    expect((await runtime.getState("pay-1")).status).toBe("parked");
  });
});

describe("--read-only (server.ts S5, routes.ts P2)", () => {
  it("S5, P2: a read-only server refuses every write even with the token, still needs the token to read, and its page draws no forms", async () => {
    const { runtime, ui } = await serve({ readOnly: true });
    const auth = { authorization: `Bearer ${ui.token}` };
    for (const r of UI_ROUTES.filter((x) => x.write === true)) {
      const res = await fetch(`${ui.url}${pathOf(r)}`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ payload: { approved: true }, message: "m" }),
      });
      expect([404, 405], r.path).toContain(res.status);
    }
    expect((await runtime.getState("pay-1")).status).toBe("parked");
    expect((await fetch(`${ui.url}/api/executions/pay-1`)).status).toBe(401);
    expect((await fetch(`${ui.url}/api/executions/pay-1`, { headers: auth })).status).toBe(200);
    const page = await (await fetch(`${ui.url}/`, { headers: auth })).text();
    expect(page).toContain(`<meta name="loom-read-only" content="true">`);
    const writable = await serve();
    const full = await fetch(`${writable.ui.url}/`, {
      headers: { authorization: `Bearer ${writable.ui.token}` },
    });
    expect(await full.text()).not.toContain("loom-read-only");
  });
});

describe("a configured token (auth.ts A4)", () => {
  it("A4: the token option is the token; a fresh one is random each start", async () => {
    const token = "t".repeat(MIN_TOKEN_LENGTH);
    const { ui } = await serve({ token });
    expect(ui.token).toBe(token);
    const res = await fetch(`${ui.url}/api/executions`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    const a = await serve();
    const b = await serve();
    expect(a.ui.token).not.toBe(b.ui.token);
    expect(a.ui.token.length).toBeGreaterThanOrEqual(MIN_TOKEN_LENGTH);
  });

  it("A4: a short or malformed token, and an unreadable token file, are refused with a typed error before the server listens", async () => {
    const runtime = createRuntime({ store: memoryStore() });
    open.push(() => runtime.close());
    for (const token of [
      "short",
      "t".repeat(MIN_TOKEN_LENGTH - 1),
      `${"t".repeat(40)} x`,
      "é".repeat(40),
    ]) {
      const refused = await startUiServer({ runtime, port: 0, token }).catch((e: unknown) => e);
      expect(isLoomError(refused, "LOOM_INVALID_INPUT"), token).toBe(true);
    }
    const dir = mkdtempSync(join(tmpdir(), "loom-ui-token-"));
    open.push(async () => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "token");
    writeFileSync(file, `${"k".repeat(48)}\n`);
    expect(await readTokenFile(file)).toBe("k".repeat(48));
    writeFileSync(file, "too short\n");
    expect(
      isLoomError(await readTokenFile(file).catch((e: unknown) => e), "LOOM_INVALID_INPUT"),
    ).toBe(true);
    const missing = await readTokenFile(join(dir, "none")).catch((e: unknown) => e);
    expect(isLoomError(missing, "LOOM_INVALID_INPUT")).toBe(true);
  });
});
