/**
 * Red team (docs/ui.md, src/ui/auth.ts A1: "every request is refused 401 unless it carries the
 * token, whatever its path and method"): odd methods, encoded and absolute-form paths, the live
 * stream, and the sign-in path with a wrong or doubled token.
 */
import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { aesGcmCodec, createRuntime, flow$, memoryStore } from "../src/index.ts";
import { startUiServer } from "../src/ui/server.ts";
import { until } from "./helpers.ts";

const SECRET = "card-4111-1111-1111-1111";
const gated = flow$("gated", async (ctx, input: { card: string }) => {
  await ctx.suspend({ timeout: 3_600_000 });
  return input.card;
});
const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
});

/** Sends `head` as raw HTTP/1.1 and gives the status line and whether the body held the secret. */
function rawHttp(port: number, head: string): Promise<{ status: string; leaked: boolean }> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, "127.0.0.1");
    let data = "";
    sock.on("data", (d) => {
      data += d.toString("utf8");
      if (data.includes(SECRET) || data.length > 100_000) sock.destroy();
    });
    sock.on("error", reject);
    sock.on("close", () =>
      resolve({ status: data.split("\r\n")[0] ?? "", leaked: data.includes(SECRET) }),
    );
    setTimeout(() => sock.destroy(), 800);
    sock.write(head);
  });
}

describe("red team: the dashboard token cannot be bypassed", () => {
  it("no request form without the token gets anything but a refusal", async () => {
    const codec = aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" });
    const runtime = createRuntime({ store: memoryStore(), codec, pollIntervalMs: 20 });
    runtime.registerFlow(gated);
    open.push(() => runtime.close());
    await runtime.start(gated, { card: SECRET }, { id: "pay-1" });
    await until(async () => (await runtime.getState("pay-1")).status === "parked");
    const ui = await startUiServer({ runtime, port: 0 });
    open.push(() => ui.close());
    const port = Number(new URL(ui.url).port);
    const host = `127.0.0.1:${port}`;
    const forms = [
      `HEAD /api/executions HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `OPTIONS /api/executions HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `GET //api/executions/pay-1 HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `GET /api/executions/pay-1%2F HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `GET /%61pi/executions/pay-1 HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `GET http://${host}/api/executions/pay-1 HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `GET /auth/../api/executions/pay-1 HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `GET /auth?token=&token=x HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      `GET /api/executions/pay-1/live HTTP/1.1\r\nHost: ${host}\r\nAccept: text/event-stream\r\n\r\n`,
      `GET /api/executions/pay-1 HTTP/1.1\r\nHost: ${host}\r\nCookie: loom_ui_${port}=\r\n\r\n`,
      `GET /api/executions/pay-1 HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer \r\n\r\n`,
      `GET /api/executions/pay-1 HTTP/1.0\r\n\r\n`,
      `POST /api/executions/pay-1/resume HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}`,
    ];
    const results: string[] = [];
    for (const f of forms) {
      const r = await rawHttp(port, f);
      const code = r.status.split(" ")[1] ?? "none";
      if (r.leaked || code.startsWith("2") || code.startsWith("3")) {
        results.push(`${f.split("\r\n")[0]} -> ${r.status}${r.leaked ? " LEAKED" : ""}`);
      }
    }
    expect(results).toEqual([]);
    expect((await runtime.getState("pay-1")).status).toBe("parked");
  });
});
