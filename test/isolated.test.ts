import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  flow$,
  InvalidInputError,
  isLoomError,
  isolated,
  IsolatedCrashError,
  memoryStore,
  step$,
  type EffectContext,
  type ResourceDelta,
} from "../src/index.ts";
import { spawn } from "./support/processes.ts";
import { big, crash, echo, fails, hog, spin, unrepresentable } from "./support/isolated-effects.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const MB = 1024 * 1024;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function pidFrom(file: string): Promise<number> {
  await until(() => existsSync(file) && readFileSync(file, "utf8").length > 0, 20_000);
  return Number(readFileSync(file, "utf8"));
}

describe("the isolated executor (K7)", () => {
  it("meters the child's peak RSS as memBytes: 200 MB allocated reports at least 200 MB", async () => {
    const f = flow$("hungry", async (ctx) => ctx.execute(hog, 200));
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "mem-1" })).result();
    expect(out).toEqual({ status: "completed", output: 200 * MB });
    const metered = (await r.readLog("mem-1")).filter((e) => e.kind === "RESOURCE_METERED");
    expect(metered).toHaveLength(1);
    const delta = (metered[0]?.payload as unknown as { delta: ResourceDelta }).delta;
    expect(delta.memBytes).toBeGreaterThanOrEqual(200 * MB);
    expect(delta.estimated).toBeUndefined();
    expect((await r.getState("mem-1"))._resources?.memBytes).toBe(delta.memBytes);
  });

  it("runs in another process with the step's ids, and forwards what the child meters", async () => {
    const f = flow$("echoes", async (ctx) => ctx.execute(echo, "hello"));
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "echo-1" })).result();
    const answer = out.output as { text: string; pid: number; key: string; attempt: number };
    expect(answer).toMatchObject({ text: "hello", key: "echo-1/echo#0", attempt: 1 });
    expect(answer.pid).not.toBe(process.pid);
    const state = await r.getState("echo-1");
    expect(state._resources?.tokens).toEqual({ input: 5, output: 1 });
    expect(state._resources?.memBytes).toBeGreaterThan(0);
  });

  it("stops a busy loop that ignores its signal and SIGTERM once aborted", async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), "loom-spin-")), "pid");
    const controller = new AbortController();
    const metered: ResourceDelta[] = [];
    const ectx: EffectContext = {
      executionId: "x",
      stepId: "spin#0",
      attempt: 1,
      idempotencyKey: "x/spin#0",
      signal: controller.signal,
      resources: {},
      meter: (d) => void metered.push(d),
    };
    const settled = Promise.resolve(spin.run(pidFile, ectx)).then(
      () => "resolved",
      (e: unknown) => (e as Error).message,
    );
    const pid = await pidFrom(pidFile);
    expect(alive(pid)).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    expect(alive(pid)).toBe(true);
    controller.abort(new Error("cancelled"));
    expect(await settled).toBe("cancelled");
    expect(alive(pid)).toBe(false);
    // Killed before it could report: the sampled peak, marked as an estimate (Linux).
    if (process.platform === "linux") {
      expect(metered.at(-1)).toMatchObject({ estimated: true });
      expect(metered.at(-1)?.memBytes).toBeGreaterThan(0);
    }
  });

  it("kills the child when the runtime lets go of the execution", async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), "loom-spin-")), "pid");
    const f = flow$("spins", async (ctx) => ctx.execute(spin, pidFile));
    const r = rt(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "spin-1" });
    const pid = await pidFrom(pidFile);
    await r.close();
    await until(() => !alive(pid), 1000);
  });

  it("a child that dies before it answers is a typed step failure, not retried", async () => {
    const f = flow$("crashes", async (ctx) =>
      ctx.execute(crash, 3).catch((e: unknown) => ({
        isCrash: e instanceof IsolatedCrashError,
        code: isLoomError(e) ? e.code : "none",
        details: (e as IsolatedCrashError).details,
      })),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "crash-1" })).result();
    expect(out.output).toEqual({
      isCrash: true,
      code: "LOOM_ISOLATED_CRASH",
      details: { exitCode: 3, signal: null },
    });
    const failed = (await r.readLog("crash-1")).filter((e) => e.kind === "STEP_FAILED");
    expect(failed).toHaveLength(1);
    expect((failed[0]?.payload as { error: { code: string } }).error.code).toBe(
      "LOOM_ISOLATED_CRASH",
    );
  });

  it("an error thrown in the child reaches the flow with its name and message", async () => {
    const f = flow$("child-throws", async (ctx) =>
      ctx
        .execute(fails, "bad shape", { retry: false })
        .catch((e: unknown) => `${(e as Error).name}: ${(e as Error).message}`),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.output).toBe("TypeError: bad shape");
  });

  it("meters the child's own peak, not the parent's size at the fork", async () => {
    const ballast = Buffer.alloc(300 * MB, 1);
    const f = flow$("light", async (ctx) => ctx.execute(echo, "x"));
    const r = rt(memoryStore()).registerFlow(f);
    await (await r.start(f, null, { id: "light-1" })).result();
    expect(ballast.length).toBe(300 * MB);
    const mem = (await r.getState("light-1"))._resources?.memBytes ?? 0;
    expect(mem).toBeGreaterThan(0);
    expect(mem).toBeLessThan(250 * MB);
  });

  it("never takes a large answer for a crash: the step settles after the last message", async () => {
    const f = flow$("large", async (ctx) =>
      ctx.parallel(
        Array.from({ length: 8 }, () => async (c: typeof ctx) => {
          const text = await c.execute(big, 1_000_000, { retry: false });
          return text.length;
        }),
      ),
    );
    const r = rt(memoryStore(), { limits: { maxStepPayloadBytes: 2_000_000 } }).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out).toEqual({ status: "completed", output: Array(8).fill(1_000_000) });
  });

  it("an answer with no JSON form is refused in the child with a typed error", async () => {
    const f = flow$("weird", async (ctx) =>
      ctx.execute(unrepresentable, null).catch((e: unknown) => (isLoomError(e) ? e.code : "?")),
    );
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, null)).result()).output).toBe("LOOM_INVALID_INPUT");
  });

  it("a child that cannot start is a typed failure, not a hang", async () => {
    const broken = isolated(
      step$("echo", async () => 1),
      {
        module: new URL("./support/isolated-effects.ts", import.meta.url),
        execArgv: ["--no-such-node-flag"],
      },
    );
    const f = flow$("broken", async (ctx) =>
      ctx.execute(broken, null).catch((e: unknown) => e instanceof IsolatedCrashError),
    );
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, null)).result()).output).toBe(true);
  });

  it("a child whose parent is killed stops when its effect heeds the signal", async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), "loom-orphan-")), "pid");
    const parent = spawn(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "support", "orphan-parent.ts"), pidFile],
      { stdio: "ignore" },
    );
    const child = await pidFrom(pidFile);
    expect(alive(child)).toBe(true);
    parent.kill("SIGKILL");
    await until(() => !alive(child), 5000);
    expect(alive(child)).toBe(false);
  });

  it("refuses an isolated effect without a module, and one its module does not export", async () => {
    const inline = step$("inline", async () => 1);
    expect(() => isolated(inline, {} as never)).toThrow(InvalidInputError);
    expect(() => isolated(inline, { module: "relative/path.ts" })).toThrow(/import\.meta\.url/);
    const stray = isolated(inline, {
      module: new URL("./support/isolated-effects.ts", import.meta.url),
    });
    const f = flow$("stray", async (ctx) =>
      ctx.execute(stray, null).catch((e: unknown) => (isLoomError(e) ? e.message : "other")),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.output).toMatch(/exports no effect named "inline"/);
  });
});
