/**
 * loomwork/ai-sdk's streams (issue 27): a `streamText` call over a durableModel is consumed
 * inside its step, its text deltas reaching `handle.deltas()` as the model sends them, before
 * the step completes (AM4); a cancel written by another process on the same SQLite file aborts
 * the provider's request midway (AM3), and the fake server sees its connection closed before
 * the answer ended.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { afterEach, describe, expect, it } from "vitest";
import { durableModel } from "../src/ai-sdk/index.ts";
import { flow$, memoryStore, type Envelope } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { fakeOpenAi, type FakeOpenAi } from "../src/testing/index.ts";
import { expectReplayEquality, runtimes, until } from "./helpers.ts";
import { ownerProcess } from "./support/processes.ts";

const rt = runtimes();
const children = new Set<ChildProcess>();
const servers: FakeOpenAi[] = [];
afterEach(async () => {
  for (const c of children) c.kill("SIGKILL");
  children.clear();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const kinds = (log: readonly Envelope[]) => log.map((e) => e.kind);
const USAGE = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 4, text: 4, reasoning: 0 },
};

/** A model whose stream the test writes part by part. */
function handWrittenModel() {
  let controller: ReadableStreamDefaultController<LanguageModelV4StreamPart> | undefined;
  const model = new MockLanguageModelV4({
    doStream: async () => ({
      stream: new ReadableStream<LanguageModelV4StreamPart>({
        start: (c) => void (controller = c),
      }),
    }),
  });
  return {
    model,
    opened: () => controller !== undefined,
    send: (part: LanguageModelV4StreamPart) => controller?.enqueue(part),
    end: () => controller?.close(),
  };
}

describe("durableModel's streams (issue 27)", () => {
  it("AM4: each text delta reaches handle.deltas() as the model sends it, before the step completes", async () => {
    const m = handWrittenModel();
    const model = durableModel(m.model, { provider: "mock" });
    const f = flow$("live", async () => {
      const s = streamText({ model, prompt: "tell me" });
      return s.text;
    });
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "live-1" });
    const live = h.deltas();
    await until(m.opened);
    m.send({ type: "stream-start", warnings: [] });
    m.send({ type: "text-start", id: "t" });
    const words = ["The ", "moon ", "pulls ", "the ", "sea."];
    for (const word of words) {
      m.send({ type: "text-delta", id: "t", delta: word });
      // The model has sent nothing past this delta: it is seen live, not at the step's end.
      const next = await live.next();
      expect(next.value).toEqual({ stepId: "llm#0", text: word });
      expect(kinds(await r.readLog("live-1"))).not.toContain("STEP_COMPLETED");
    }
    m.send({ type: "text-end", id: "t" });
    m.send({ type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE });
    m.end();
    const out = await h.result();
    expect(out.output).toBe(words.join(""));
    expect((await live.next()).done).toBe(true);
    // The log holds the step's result, not a fact per delta; the SDK's text is the recorded one.
    // (Its STEP_STARTED is written at a group commit the step is still running for: R9.)
    expect(kinds(await r.readLog("live-1")).filter((k) => k !== "STEP_STARTED")).toEqual([
      "EXECUTION_STARTED",
      "RESOURCE_METERED",
      "STEP_COMPLETED",
      "EXECUTION_COMPLETED",
    ]);
  });

  it("AM3: a cancel from another process on the same SQLite file closes the provider's stream before the answer ends", async () => {
    // 500 deltas of 8 characters, 20 ms apart: ten seconds of answer.
    const fake = await fakeOpenAi({ text: "w".repeat(4000), deltaChars: 8, deltaMs: 20 });
    servers.push(fake);
    const db = join(mkdtempSync(join(tmpdir(), "loom-ai-sdk-cancel-")), "loom.db");
    const owner = ownerProcess(
      join(import.meta.dirname, "fixtures", "ai-sdk", "stream-owner.ts"),
      [db, fake.baseURL, "writer-1"],
      children,
    );
    const r = rt(sqliteStore(db), { background: false });
    // The stream is under way, and its step's start is in the log.
    await until(() => (fake.requests[0]?.deltasSent ?? 0) >= 1, 30_000);
    await until(async () => kinds(await r.readLog("writer-1")).includes("STEP_STARTED"));
    expect(await r.cancel("writer-1", "enough")).toBe(true);
    await until(() => owner.out().includes("\n") || owner.exited(), 30_000);
    const outcome = JSON.parse(owner.out().trim().split("\n").at(-1) ?? "") as {
      status: string;
      error?: { code?: string };
    };
    expect(outcome).toMatchObject({ status: "cancelled", error: { code: "LOOM_CANCELLED" } });
    // The owner is still up: the connection closes because the cancel aborted the request, or
    // the answer runs to its end.
    const request = fake.requests[0];
    await until(
      () => request?.closedEarly === true || request?.deltasSent === request?.deltasTotal,
      60_000,
    );
    expect(owner.exited()).toBe(false);
    expect(request?.closedEarly).toBe(true);
    expect(request?.closedAt).toBeDefined();
    expect(request?.deltasSent).toBeLessThan(request?.deltasTotal ?? 0);
    expect(fake.requests).toHaveLength(1);
    const log = await r.readLog("writer-1");
    expect(kinds(log)).not.toContain("STEP_COMPLETED");
    expect(kinds(log).slice(-2)).toEqual(["STEP_CANCELLED", "EXECUTION_CANCELLED"]);
    await expectReplayEquality(r, "writer-1");
  });
});
