/**
 * The worker seam against a client without the secret, and against a replaying or impersonating
 * network (issue 22, item 3): signing.ts A1..A6, request-body.ts B1..B5, worker-server.ts H5, H7,
 * http-client.ts C1..C2.
 */
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  createWorkerServer,
  flow$,
  memoryStore,
  RemoteWorkerRuntime,
  signedHeaders,
  WorkerRefusedError,
  type WorkerServer,
  type WorkerServerOptions,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { answerHeaders, answering, BIN, Child, FLOWS, SECRET } from "./fixtures/remote/harness.ts";
import { execFile, spawn } from "./support/processes.ts";
import { flood } from "../bench/seam-flood-attacker.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const servers: WorkerServer[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const doubler = flow$("doubler", async (ctx, input: { n: number }) =>
  ctx.run("double", async () => input.n * 2),
);

async function serving(options: Omit<Partial<WorkerServerOptions>, "runtime"> = {}) {
  const store = memoryStore();
  const worker = rt(store, { ownerId: "worker-a" }).registerFlow(doubler);
  const orchestrator = rt(store.reopen(), { ownerId: "orchestrator", background: false });
  const server = createWorkerServer({ runtime: worker, secret: SECRET, ...options });
  servers.push(server);
  const url = await server.listen(0);
  return { orchestrator, server, url };
}

/** A request signed for `audience` (default: the server's own origin), sent as it is. */
function signed(url: string, body: string, audience = new URL(url).origin) {
  return signedHeaders(SECRET, { method: "POST", path: "/dispatch", body, audience });
}

async function post(url: string, headers: Record<string, string>, body: string) {
  const res = await fetch(new URL("/dispatch", url), { method: "POST", headers, body });
  return { status: res.status, body: (await res.json()) as { error?: { code?: string } } };
}

describe("replay and audience (A3, A5)", () => {
  it("refuses a captured dispatch sent again, even after its execution is gone", async () => {
    const { url, orchestrator } = await serving();
    const body = JSON.stringify({ executionId: "replayed-1", flow: "doubler", input: { n: 2 } });
    const headers = signed(url, body);
    expect((await post(url, headers, body)).status).toBe(202);
    await until(async () => (await orchestrator.getState("replayed-1")).status === "completed");
    const again = await post(url, headers, body);
    expect(again.status).toBe(401);
    expect(again.body.error?.code).toBe("LOOM_UNAUTHENTICATED");
  });

  it("refuses a request signed for another worker id, though it has the fleet's secret", async () => {
    const a = await serving();
    const b = await serving();
    const body = JSON.stringify({ executionId: "elsewhere-1", flow: "doubler", input: { n: 1 } });
    const forB = signed(a.url, body, new URL(b.url).origin);
    const answer = await post(a.url, forB, body);
    expect(answer.status).toBe(401);
    await expect(a.orchestrator.getState("elsewhere-1")).rejects.toMatchObject({
      code: "LOOM_NOT_FOUND",
    });
    // The same request, signed for its own audience, is taken.
    expect((await post(a.url, signed(a.url, body), body)).status).toBe(202);
  });
});

describe("signed answers (A6, C1)", () => {
  const accepted202 = (sign: (req: IncomingMessage, body: string) => Record<string, string>) =>
    answering((res, req) => {
      const body = JSON.stringify({ executionId: "forged-1" });
      res.writeHead(202, { "content-type": "application/json", ...sign(req, body) }).end(body);
    });

  it("rejects a 202 unsigned, signed with another secret, or signed for another request", async () => {
    const store = memoryStore();
    const orchestrator = rt(store, { ownerId: "orchestrator", background: false });
    let captured: Record<string, string> | undefined;
    const fakes = [
      await accepted202(() => ({})),
      await accepted202((req, body) =>
        answerHeaders(req, 202, body, "another-secret-entirely-0123"),
      ),
      // A genuine answer to an earlier request, replayed for the next one.
      await accepted202((req, body) => (captured ??= answerHeaders(req, 202, body))),
    ];
    for (const fake of fakes) {
      closers.push(() => fake.close());
      const remote = new RemoteWorkerRuntime({
        url: fake.url,
        secret: SECRET,
        runtime: orchestrator,
      });
      if (fake === fakes[2]) await remote.health().catch(() => undefined);
      let accepted = false;
      const dispatched = remote.dispatch(
        { executionId: "forged-1", flow: "doubler", input: { n: 1 } },
        { onAccepted: () => (accepted = true) },
      );
      await expect(dispatched).rejects.toBeInstanceOf(WorkerRefusedError);
      expect(accepted).toBe(false);
    }
  });

  it("rejects a forged request error, so the dispatcher never takes it for the worker's", async () => {
    const orchestrator = rt(memoryStore(), { ownerId: "orchestrator", background: false });
    const fake = await answering((res) => {
      const error = {
        name: "ExecutionConflictError",
        code: "LOOM_EXECUTION_CONFLICT",
        message: "x",
      };
      res.writeHead(409, { "content-type": "application/json" }).end(JSON.stringify({ error }));
    });
    closers.push(() => fake.close());
    const remote = new RemoteWorkerRuntime({
      url: fake.url,
      secret: SECRET,
      runtime: orchestrator,
    });
    await expect(remote.dispatch({ executionId: "c-1", flow: "doubler" })).rejects.toBeInstanceOf(
      WorkerRefusedError,
    );
  });
});

describe("a flood from a client without the secret (H5, B1, B3)", () => {
  it("leaves a signed dispatch from another address succeeding while it goes on", async () => {
    // The attacker is bench/seam-flood-attacker.ts F1..F3, shared with `bench seam-flood`.
    // Stalled requests are given long enough to outlast the test: the flood never lets go.
    const { url, orchestrator } = await serving({ requestTimeoutMs: 120_000 });
    const { flooding, stop } = flood(url, "127.0.0.2", 20, 300);
    closers.push(async () => stop());
    await flooding;
    const remote = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
    let n = 0;
    // Retried until it succeeds, while the flood is on: a refusal or a cut connection is a miss.
    await until(async () => {
      const executionId = `through-${++n}`;
      try {
        const outcome = await remote.dispatch({ executionId, flow: "doubler", input: { n } });
        return outcome.status === "completed";
      } catch {
        return false;
      }
    }, 30_000);
    stop();
  }, 90_000);
});

describe("TLS (H7, C2)", () => {
  it("serves over https with a self-signed certificate the client is told to trust", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-tls-"));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const { cert, key } = await selfSigned(dir);
    const { url, orchestrator } = await serving({ tls: { cert, key } });
    expect(url.startsWith("https://")).toBe(true);
    const remote = new RemoteWorkerRuntime({
      url,
      secret: SECRET,
      runtime: orchestrator,
      ca: cert,
    });
    const outcome = await remote.dispatch({
      executionId: "tls-1",
      flow: "doubler",
      input: { n: 4 },
    });
    expect(outcome).toMatchObject({ status: "completed", output: 8 });
    // A client that does not trust the certificate does not get through.
    const untrusting = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
    await expect(untrusting.health()).rejects.toMatchObject({ code: "LOOM_WORKER_UNREACHABLE" });
  });
});

describe("loom serve's seam flags (H5, H7, A5)", () => {
  it("serves HTTPS with --tls-cert/--tls-key, its secret from --secret-file, for --worker-id", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-serve-tls-"));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const { cert, key } = await selfSigned(dir);
    const secretFile = join(dir, "secret");
    writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
    writeFileSync(join(dir, "tls-cert.pem"), cert);
    writeFileSync(join(dir, "tls-key.pem"), key, { mode: 0o600 });
    const db = join(dir, "loom.db");
    const args = [BIN, "serve", FLOWS, "--db", db, "--port", "0", "--secret-file", secretFile];
    const flags = ["--tls-cert", join(dir, "tls-cert.pem"), "--tls-key", join(dir, "tls-key.pem")];
    flags.push(
      "--worker-id",
      "worker-7",
      "--max-connections",
      "8",
      "--request-timeout-ms",
      "20000",
    );
    const serve = new Child(
      spawn(process.execPath, [...args, ...flags], { stdio: ["ignore", "pipe", "pipe"] }),
    );
    closers.push(async () => void (await serve.stop()));
    const url = await serve.line((l) => l.startsWith("https://"));
    const reader = sqliteStore(db);
    closers.push(() => reader.close());
    const remote = new RemoteWorkerRuntime({
      url,
      secret: SECRET,
      store: reader,
      ca: cert,
      workerId: "worker-7",
    });
    const outcome = await remote.dispatch({ executionId: "s-1", flow: "doubler", input: { n: 5 } });
    expect(outcome).toEqual({ status: "completed", output: 10 });
    // Signed for the URL rather than the worker id it was given: refused (A5).
    const byUrl = new RemoteWorkerRuntime({ url, secret: SECRET, store: reader, ca: cert });
    await expect(byUrl.health()).rejects.toBeInstanceOf(WorkerRefusedError);
  });
});

/** A self-signed certificate for 127.0.0.1, made by the `openssl` command. */
async function selfSigned(dir: string): Promise<{ cert: string; key: string }> {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const keyPath = join(dir, "key.pem");
  const certPath = join(dir, "cert.pem");
  writeFileSync(keyPath, privateKey.export({ type: "pkcs8", format: "pem" }));
  await execFile("openssl", [
    "req",
    "-x509",
    "-new",
    "-key",
    keyPath,
    "-out",
    certPath,
    "-days",
    "1",
    "-subj",
    "/CN=127.0.0.1",
    "-addext",
    "subjectAltName=IP:127.0.0.1",
  ]);
  return { cert: readFileSync(certPath, "utf8"), key: readFileSync(keyPath, "utf8") };
}
