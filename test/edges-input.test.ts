/**
 * Issue 21 item 2: the value a body gets is exactly what its replay will get. An array with
 * holes reaches the body with nulls where the log has them, and an own `__proto__` key stays a
 * key, for inputs, resume payloads and messages alike.
 */
import { describe, expect, it } from "vitest";
import { flow$, memoryStore, toJson } from "../src/index.ts";
import { expectReplayEquality, runtimes } from "./helpers.ts";

const rt = runtimes();

describe("lossless input (issue 21)", () => {
  it("toJson turns holes into null and keeps an own __proto__ key as data", () => {
    const holey: number[] = [1];
    holey[2] = 3; // index 1 is a hole
    expect(toJson(holey, "x")).toEqual([1, null, 3]);
    expect(Object.keys(toJson(holey, "x") as object)).toEqual(["0", "1", "2"]);
    const proto = JSON.parse('{"__proto__":{"x":1},"a":2}') as object;
    const json = toJson(proto, "x") as Record<string, unknown>;
    expect(Object.keys(json)).toEqual(["__proto__", "a"]);
    expect(Object.getPrototypeOf(json)).toBe(Object.prototype);
    expect(JSON.stringify(json)).toBe('{"__proto__":{"x":1},"a":2}');
  });

  it("a body that iterates an input with holes records the steps its replay asks for", async () => {
    const seen: unknown[] = [];
    const f = flow$("each", async (ctx, items: unknown[]) => {
      const out: unknown[] = [];
      // forEach skips holes: a live hole and a replayed null would ask for different steps.
      const indexes: number[] = [];
      items.forEach((_item, i) => indexes.push(i));
      for (const i of indexes) out.push(await ctx.run(`item-${i}`, () => items[i] ?? null));
      seen.push(items);
      return out;
    });
    const r = rt(memoryStore()).registerFlow(f);
    const input: number[] = [1];
    input[2] = 3; // index 1 is a hole
    const h = await r.start(f, input, { id: "holes" });
    const outcome = await h.result();
    expect(outcome.status).toBe("completed");
    expect(outcome.output).toEqual([1, null, 3]);
    expect(seen[0]).toEqual([1, null, 3]);
    expect(Object.keys(seen[0] as object)).toEqual(["0", "1", "2"]);
    await expectReplayEquality(r, "holes");
  });

  it("an own __proto__ key of an input and of a resume payload reaches the body and the log", async () => {
    const f = flow$("proto", async (ctx, input: Record<string, unknown>) => {
      const answer = await ctx.suspend<Record<string, unknown>>();
      return { input: Object.keys(input), answer: Object.keys(answer) };
    });
    const r = rt(memoryStore()).registerFlow(f);
    const input = JSON.parse('{"__proto__":{"x":1},"a":2}') as Record<string, unknown>;
    await r.start(f, input, { id: "p" });
    await r.resume("p", JSON.parse('{"__proto__":5,"b":1}') as unknown);
    const outcome = await r.waitForCompletion("p");
    expect(outcome.output).toEqual({ input: ["__proto__", "a"], answer: ["__proto__", "b"] });
    const started = (await r.readLog("p"))[0]?.payload as { input?: object };
    expect(Object.keys(started.input ?? {})).toEqual(["__proto__", "a"]);
    await expectReplayEquality(r, "p");
  });
});
