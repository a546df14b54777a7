/** ADR 0109 D6: chain lineage as a pure projection, continueEvery, and `loom show` of a chain. */
import { spawn } from "./support/processes.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  chainLineage,
  continueEvery,
  createRuntime,
  flow$,
  InvalidInputError,
  memoryStore,
  type Envelope,
  type Runtime,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();

/** Rotates every 2 turns with continueEvery, and ends after `last` turns. */
function chat(last: number) {
  return flow$("lineage-chat", async (ctx, carry: { turns: number } | null) => {
    const rotate = continueEvery(2);
    let turns = carry?.turns ?? 0;
    for (;;) {
      await ctx.receive<string>();
      turns++;
      if (turns === last) return turns;
      if (rotate.tick()) return ctx.continueAsNew({ turns });
    }
  });
}

async function runChat(r: Runtime, id: string, turns: number): Promise<Envelope[]> {
  const f = chat(turns);
  r.registerFlow(f);
  await r.start(f, null, { id });
  for (let i = 0; i < turns; i++) await r.send(id, i);
  const lastGen = Math.ceil(turns / 2) - 1;
  const head = lastGen === 0 ? id : `${id}~${lastGen}`;
  await until(async () => (await r.readLog(head)).length > 0);
  await r.waitForCompletion(head);
  const events: Envelope[] = [];
  for (let n = 0; n <= lastGen; n++) events.push(...(await r.readLog(n ? `${id}~${n}` : id)));
  return events;
}

describe("chainLineage and continueEvery (ADR 0109 D6)", () => {
  it("continueEvery counts turns per generation and says when to rotate", () => {
    const every = continueEvery(3);
    expect([1, 2, 3, 4, 5, 6].map(() => every.tick())).toEqual([
      false,
      false,
      true,
      false,
      false,
      true,
    ]);
    expect(every.turns).toBe(6);
    expect(() => continueEvery(0)).toThrow(InvalidInputError);
    expect(() => continueEvery(1.5)).toThrow(InvalidInputError);
  });

  it("projects a chain's generations from any member, oldest first, with the head", async () => {
    const r = rt(memoryStore(), { features: { continueAsNew: true } });
    const events = await runChat(r, "ln", 6);
    const fromFirst = chainLineage(events, "ln");
    expect(fromFirst?.chainId).toBe("ln");
    expect(fromFirst?.head).toBe("ln~2");
    expect(fromFirst?.generations.map((g) => [g.executionId, g.generation, g.status])).toEqual([
      ["ln", 0, "continued"],
      ["ln~1", 1, "continued"],
      ["ln~2", 2, "completed"],
    ]);
    expect(fromFirst?.generations[0]?.continuedTo).toBe("ln~1");
    // The same lineage from the middle, from shuffled events.
    const shuffled = [...events].reverse();
    expect(chainLineage(shuffled, "ln~1")).toEqual(fromFirst);
    // A log that is not in the events ends the walk: retention released the head.
    const withoutHead = events.filter((e) => e.executionId !== "ln~2");
    expect(chainLineage(withoutHead, "ln")?.head).toBe("ln~1");
    expect(chainLineage(events, "nobody")).toBeUndefined();
  });
});

describe("loom show of a chain member (ADR 0109 D6)", () => {
  it("renders the chain's generations and the continuation", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-chain-show-"));
    try {
      const db = join(dir, "loom.db");
      const r = createRuntime({ store: sqliteStore(db), features: { continueAsNew: true } });
      await runChat(r, "sh", 4);
      await r.close();
      const bin = fileURLToPath(new URL("../bin/loom.js", import.meta.url));
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, [bin, "show", "sh", "--db", db], { cwd: dir });
        let text = "";
        child.stdout.on("data", (d: Buffer) => (text += d.toString()));
        child.on("error", reject);
        child.on("exit", (code) =>
          code === 0 ? resolve(text) : reject(new Error(`exit ${code}`)),
        );
      });
      expect(out).toMatch(/^status\s+continued$/m);
      expect(out).toMatch(/^continued\s+as sh~1$/m);
      expect(out).toMatch(/^chain\s+sh: 2 generations, \[sh\] -> sh~1 \(head sh~1, completed\)$/m);
      expect(out).toMatch(/EXECUTION_CONTINUED\s+continued as sh~1 \(generation 1 of chain sh\)/);
      expect(out).toMatch(/MESSAGE_CONSUMED\s+receive#0 took message 0 of main: 0/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
