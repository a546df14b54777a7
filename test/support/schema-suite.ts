/**
 * Issue 19's input checks on a real store (kernel/schema.ts V1..V3): a flow's Standard Schema
 * refuses a bad input at `start` with InvalidInputError listing the issues, before anything is
 * appended, and records the schema's output; a child's input, a carry, a resume payload, a
 * message and an output are checked the same way.
 */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createRuntime,
  flow$,
  isLoomError,
  type Runtime,
  type StandardSchemaV1,
  type Store,
} from "../../src/index.ts";
import { until } from "../helpers.ts";

export interface SchemaBackend {
  name: string;
  /** A fresh store for one test. */
  open(): Promise<Store>;
}

/** A schema written by hand, as a library other than zod shapes it: path segments as objects. */
const evenNumber: StandardSchemaV1<unknown, number> = {
  "~standard": {
    version: 1,
    vendor: "hand-written",
    validate: async (value) =>
      typeof value === "number" && value % 2 === 0
        ? { value }
        : { issues: [{ message: "must be an even number", path: [{ key: "n" }, 0] }] },
  },
};

const ticket = z.object({
  user: z.object({ name: z.string(), age: z.number() }),
  priority: z.enum(["low", "high"]).default("low"),
});

export function schemaSuite(backend: SchemaBackend): void {
  describe(`Standard Schema input checks on ${backend.name} (issue 19)`, () => {
    const open: Runtime[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((r) => r.close()));
    });
    const runtime = async (): Promise<Runtime> => {
      const r = createRuntime({ store: await backend.open(), features: { continueAsNew: true } });
      open.push(r);
      return r;
    };

    const triage = flow$(
      "triage",
      async (ctx, input) => ctx.run("route", () => `${input.user.name}:${input.priority}`),
      { input: ticket },
    );

    it("V1: a bad input is refused with InvalidInputError listing every issue, and nothing is appended", async () => {
      const r = (await runtime()).registerFlow(triage);
      // By name, as `loom run --input`, the worker seam and the dashboard start it: untyped.
      const bad = { user: { name: 7, age: "old" }, priority: "urgent" };
      const refused = await r.start("triage", bad, { id: "t-bad" }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(Error);
      expect(isLoomError(refused, "LOOM_INVALID_INPUT")).toBe(true);
      const error = refused as Error & { details: { issues: { path: unknown[] }[] } };
      expect(error.message).toMatch(/the input of flow "triage" fails its schema/);
      expect(error.details.issues.map((i) => i.path)).toEqual(
        expect.arrayContaining([["user", "name"], ["user", "age"], ["priority"]]),
      );
      expect(await r.store.read("t-bad", 0, 10)).toEqual([]);
      expect((await r.list({})).map((e) => e.executionId)).not.toContain("t-bad");
      // The same id starts cleanly afterwards: the refusal left nothing behind.
      const ok = await r.start(triage, { user: { name: "ada", age: 36 } }, { id: "t-bad" });
      expect(await ok.result()).toMatchObject({ status: "completed", output: "ada:low" });
    });

    it("V2: what is recorded is the schema's output, defaults applied", async () => {
      const r = await runtime();
      const h = await r.start(triage, { user: { name: "ada", age: 36 } }, { id: "t-ok" });
      expect((await h.result()).output).toBe("ada:low");
      const [started] = await r.store.read("t-ok", 0, 1);
      expect((started?.payload as { input: unknown }).input).toEqual({
        user: { name: "ada", age: 36 },
        priority: "low",
      });
    });

    it("an async schema of another library: its issues' object path segments read as keys", async () => {
      const r = await runtime();
      const f = flow$("even", async (_ctx, n) => n * 2, { input: evenNumber });
      const refused = await r.start(f, 3, { id: "even-3" }).catch((e: unknown) => e);
      expect(refused).toMatchObject({
        code: "LOOM_INVALID_INPUT",
        details: { issues: [{ message: "must be an even number", path: ["n", 0] }] },
      });
      expect(await r.store.read("even-3", 0, 10)).toEqual([]);
      expect((await (await r.start(f, 4, { id: "even-4" })).result()).output).toBe(8);
    });

    it("a child's input is checked at ctx.spawn, before the spawn is recorded", async () => {
      const r = await runtime();
      r.registerFlow(triage);
      const parent = flow$("parent", async (ctx) => {
        try {
          await ctx.spawn("triage", { user: { name: "bob" } });
          return "spawned";
        } catch (e) {
          return isLoomError(e, "LOOM_INVALID_INPUT") ? "refused" : "other";
        }
      });
      const h = await r.start(parent, undefined, { id: "p-1" });
      expect((await h.result()).output).toBe("refused");
      const kinds = (await r.store.read("p-1", 0, 100)).map((e) => e.kind);
      expect(kinds).not.toContain("CHILD_STARTED");
    });

    it("a carry into the next generation is checked against the flow's input schema", async () => {
      const r = await runtime();
      const counter = flow$(
        "counter",
        async (ctx, input) => {
          if (input.n >= 1) return input.n;
          try {
            await ctx.continueAsNew({ n: "one" });
          } catch (e) {
            if (!isLoomError(e, "LOOM_INVALID_INPUT")) throw e;
          }
          return ctx.continueAsNew({ n: input.n + 1 });
        },
        { input: z.object({ n: z.number() }) },
      );
      const h = await r.start(counter, { n: 0 }, { id: "ctr" });
      expect(await h.result()).toMatchObject({ status: "continued", continuedTo: "ctr~1" });
      expect((await r.waitForCompletion("ctr~1")).output).toBe(1);
    });

    it("suspend({ schema }) hands the body the checked payload, or InvalidInputError it can recover from", async () => {
      const r = await runtime();
      const ask = flow$("ask", async (ctx) => {
        const schema = z.object({ answer: z.string() });
        try {
          return await ctx.suspend({ schema });
        } catch (e) {
          if (!isLoomError(e, "LOOM_INVALID_INPUT")) throw e;
          return { again: await ctx.suspend({ schema }) };
        }
      });
      const h = await r.start(ask, undefined, { id: "ask-1" });
      await until(async () => (await r.getState("ask-1")).status === "parked");
      await r.resume("ask-1", { answer: 42 });
      await until(async () => {
        const kinds = (await r.store.read("ask-1", 0, 100)).map((e) => e.kind);
        return kinds.filter((k) => k === "SUSPENDED").length === 2;
      });
      await r.resume("ask-1", { answer: "yes" });
      expect((await h.result()).output).toEqual({ again: { answer: "yes" } });
    });

    it("receive({ schema }) checks each message as the body reads it", async () => {
      const r = await runtime();
      const inbox = flow$("inbox-checked", async (ctx) => {
        const schema = z.object({ text: z.string() });
        const first = await ctx
          .receive({ schema })
          .then((m) => m.text)
          .catch((e: unknown) => {
            if (isLoomError(e, "LOOM_INVALID_INPUT")) return "refused";
            throw e;
          });
        const second = await ctx.receive({ schema });
        return [first, second.text];
      });
      const h = await r.start(inbox, undefined, { id: "in-1" });
      await r.send("in-1", { text: 5 });
      await r.send("in-1", { text: "hello" });
      expect((await h.result()).output).toEqual(["refused", "hello"]);
    });

    it("an output that fails the flow's output schema fails the execution with InvalidInputError", async () => {
      const r = await runtime();
      // The body trusts what it parsed; the output schema does not.
      const f = flow$("out", async (_ctx, raw: string) => JSON.parse(raw) as { total: number }, {
        output: z.object({ total: z.number() }),
      });
      const out = await (await r.start(f, '{"total":"many"}', { id: "out-1" })).result();
      expect(out.status).toBe("failed");
      expect(out.error).toMatchObject({ code: "LOOM_INVALID_INPUT" });
      expect(out.error?.message).toMatch(/the output of flow "out" fails its schema/);
    });

    it("a schema that is not a Standard Schema is refused when the flow is defined", () => {
      // What a JavaScript caller may pass: the type says schema, the value is not one.
      const notASchema = { parse: () => 1 } as unknown as StandardSchemaV1<unknown, number>;
      expect(() => flow$("x", async () => 1, { input: notASchema })).toThrow(
        /must be a Standard Schema/,
      );
    });
  });
}
