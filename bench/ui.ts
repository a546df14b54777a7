/**
 * `npm run bench -- ui [--executions 10000] [--requests 500]`: how fast the dashboard answers
 * its first screen with many executions in the store (issue 11).
 *
 * A SQLite store (synchronous NORMAL: the fill is not what is measured) is filled with real
 * executions of small flows, started in concurrent waves so group commit writes them quickly:
 * most complete after one step, one in ten parks on a suspend, one in twenty fails. Then the UI
 * server is started on that runtime and N list requests are timed one after another over HTTP:
 * the first page, pages filtered by status, by flow, by id prefix, later pages (`after`), and
 * (issue 25 item 4) the dearest first, one principal's, and the latest updated: a tick meters a
 * cost and tokens, one execution in three has one of 20 principals. Each round also times `GET /`
 * (the page shell). The baseline, in the same run, is the same number of
 * `runtime.list({ limit: 50 })` calls without HTTP. Target: list p99 <= 50 ms (issue 25).
 *
 * It also prints the size of the dashboard's client as served (`/assets/app.js`, the minified
 * bundle of src/ui/client/), raw and gzipped, beside two baselines measured in the same run: the
 * same bundle unminified, and the client's TypeScript sources summed.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { createRuntime, flow$, step$, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { startUiServer } from "../src/ui/server.ts";
import { cursorOf } from "../src/ui/list.ts";
import { emit, intFlag, latencyStats, note, nowMs, parseFlags, round, withTempDir } from "./lib.ts";

const TARGET_P99_MS = 50;
const WAVE = 500;

/** An LLM-like call: what it costs (cents, varied) and its tokens are metered (issue 25 item 4). */
const paid = step$("paid", async (n: number, ectx) => {
  ectx.meter({ costUsd: (n % 97) / 1000, tokens: { input: n % 500, output: 20 } });
  return n + 1;
});
const tick = flow$("tick", async (ctx, n: number) => ctx.execute(paid, n));
const hold = flow$("hold", async (ctx) => ctx.suspend({ timeout: 86_400_000 }));
const fail = flow$("fail", async (ctx) =>
  ctx.run("boom", async () => {
    throw new Error("boom");
  }),
);

const CLIENT_DIR = join(import.meta.dirname, "..", "src", "ui", "client");

/** The served client's bytes beside its unminified bundle's and its sources' (see the head). */
async function bundleSizes(served: string): Promise<Record<string, number>> {
  const esbuild = await import("esbuild");
  const plain = await esbuild
    .build({
      entryPoints: [join(CLIENT_DIR, "main.ts")],
      bundle: true,
      format: "iife",
      target: "es2022",
      platform: "browser",
      charset: "utf8",
      write: false,
      logLevel: "silent",
    })
    .finally(() => esbuild.stop());
  const unminified = plain.outputFiles[0]?.text ?? "";
  const sources = readdirSync(CLIENT_DIR)
    .filter((f) => f.endsWith(".ts"))
    .map((f) => readFileSync(join(CLIENT_DIR, f), "utf8"))
    .join("\n");
  const bytes = (text: string): number => Buffer.byteLength(text);
  const gzip = (text: string): number => gzipSync(text, { level: 9 }).length;
  return {
    bundleBytes: bytes(served),
    bundleGzipBytes: gzip(served),
    unminifiedBytes: bytes(unminified),
    unminifiedGzipBytes: gzip(unminified),
    sourceBytes: bytes(sources),
    sourceGzipBytes: gzip(sources),
  };
}

/** The id of execution `i`: zero-padded, so ids sort in start order. */
const idOf = (i: number): string => `run-${String(i).padStart(6, "0")}`;

async function fill(runtime: Runtime, executions: number): Promise<void> {
  for (let from = 0; from < executions; from += WAVE) {
    const wave: Promise<unknown>[] = [];
    for (let i = from; i < Math.min(executions, from + WAVE); i++) {
      const flow = i % 10 === 3 ? hold : i % 20 === 7 ? fail : tick;
      // One in three started by one of 20 principals.
      const principal = i % 3 === 0 ? { principal: `user-${i % 20}` } : {};
      const started = runtime.start(flow, i, { id: idOf(i), ...principal });
      wave.push(flow === hold ? started : started.then((h) => h.result()));
    }
    await Promise.all(wave);
    if ((from / WAVE) % 5 === 4) note(`ui: ${Math.min(executions, from + WAVE)} executions`);
  }
}

/** The list requests timed, in turn: first screens and the pages users go to from them. */
function queries(executions: number): string[] {
  const after = (i: number) => cursorOf({}, 0, idOf(Math.floor(i)));
  return [
    "",
    "status=parked",
    "status=failed,cancelled",
    "flow=tick",
    `q=${idOf(Math.floor(executions / 3)).slice(0, -2)}`,
    `after=${after(executions / 2)}`,
    `status=completed&flow=tick&after=${after(executions / 4)}`,
    `q=${idOf(executions - 1)}`,
    // Issue 25 item 4: the dearest first, one principal's, and both; the latest updated.
    "sort=cost&order=desc",
    "principal=user-3",
    "principal=user-3&sort=cost&order=desc",
    "sort=updated&order=desc",
    `sort=cost&order=desc&after=${cursorOf({ sort: "cost", order: "desc" }, 0.05, idOf(Math.floor(executions / 2)))}`,
  ];
}

export async function uiBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["executions", "requests"]);
  const executions = intFlag(flags, "executions", 10_000);
  const requests = intFlag(flags, "requests", 500);
  await withTempDir(async (dir) => {
    const runtime = createRuntime({
      store: sqliteStore(`${dir}/ui.db`, { synchronous: "NORMAL" }),
      background: false,
    });
    runtime.registerFlow(tick).registerFlow(hold).registerFlow(fail);
    note(`ui: filling ${executions} executions`);
    const t0 = nowMs();
    await fill(runtime, executions);
    const fillMs = nowMs() - t0;
    const ui = await startUiServer({ runtime, port: 0 });
    try {
      const mix = queries(executions);
      const headers = { authorization: `Bearer ${ui.token}` };
      const get = async (path: string): Promise<number> => {
        const started = nowMs();
        const res = await fetch(`${ui.url}${path}`, { headers });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`);
        return nowMs() - started;
      };
      note(`ui: warming up, then ${requests} list requests`);
      for (const q of mix) await get(`/api/executions?${q}`);
      await get("/");
      const list: number[] = [];
      const page: number[] = [];
      const byQuery = mix.map((): number[] => []);
      for (let i = 0; i < requests; i++) {
        const took = await get(`/api/executions?${mix[i % mix.length] ?? ""}`);
        list.push(took);
        byQuery[i % mix.length]?.push(took);
        if (i % mix.length === 0) page.push(await get("/"));
      }
      mix.forEach((query, i) => {
        const s = latencyStats(byQuery[i] ?? []);
        emit({
          name: "ui",
          phase: "query",
          query: query === "" ? "(first page)" : query,
          p50Ms: round(s.p50Us / 1000, 3),
          p99Ms: round(s.p99Us / 1000, 3),
        });
      });
      const script = await (await fetch(`${ui.url}/assets/app.js`, { headers })).text();
      const sizes = await bundleSizes(script);
      emit({
        name: "ui",
        phase: "bundle",
        ...sizes,
        gzipRatio: round((sizes.bundleGzipBytes ?? 0) / (sizes.unminifiedGzipBytes ?? 1)),
      });
      const first = await (await fetch(`${ui.url}/api/executions`, { headers })).json();
      const shown = (first as { executions: unknown[] }).executions.length;
      const baseline: number[] = [];
      for (let i = 0; i < requests; i++) {
        const started = nowMs();
        await runtime.list({ limit: 50 });
        baseline.push(nowMs() - started);
      }
      const l = latencyStats(list);
      const p = latencyStats(page);
      const b = latencyStats(baseline);
      const listP99Ms = round(l.p99Us / 1000, 3);
      emit({
        name: "ui",
        executions,
        requests,
        firstPageRows: shown,
        fillMs: Math.round(fillMs),
        listP50Ms: round(l.p50Us / 1000, 3),
        listP99Ms,
        listMaxMs: round(l.maxUs / 1000, 3),
        pageP99Ms: round(p.p99Us / 1000, 3),
        baselineP50Ms: round(b.p50Us / 1000, 3),
        baselineP99Ms: round(b.p99Us / 1000, 3),
        ratio: round(l.p50Us / b.p50Us),
        target: `listP99Ms <= ${TARGET_P99_MS}`,
        pass: listP99Ms <= TARGET_P99_MS && shown === 50,
      });
    } finally {
      await ui.close();
      await runtime.close();
    }
  });
}
