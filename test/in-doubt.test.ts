import { spawn } from "./support/processes.ts";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { flow$, memoryStore, step$ } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { expectReplayEquality, runtimes } from "./helpers.ts";

const CHILD = join(import.meta.dirname, "support", "in-doubt-child.ts");
const rt = runtimes();

function child(args: string[]) {
  const p = spawn(process.execPath, ["--import", "tsx", CHILD, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  p.stdout.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<void>((r) => p.on("exit", () => r()));
  return { p, out: () => out, exited };
}

async function waitFor(check: () => boolean, ms = 20_000): Promise<void> {
  const giveUp = Date.now() + ms;
  while (!check()) {
    if (Date.now() > giveUp) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("in-doubt effects (K9)", () => {
  for (const flavor of ["atMostOnce", "idempotent"] as const) {
    it(`a process killed during an ${flavor} effect recovers as it should`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "loom-doubt-"));
      const db = join(dir, "loom.db");
      const keys = join(dir, "keys");
      const crashing = child([db, keys, "crash", flavor]);
      await waitFor(() => crashing.out().includes("inside"));
      // The at-most-once start is durable before the code runs; give the other its group commit.
      if (flavor === "idempotent") await new Promise((r) => setTimeout(r, 50));
      crashing.p.kill("SIGKILL");
      await crashing.exited;
      const recovering = child([db, keys, "recover", flavor]);
      await recovering.exited;
      const outcome = JSON.parse(recovering.out()) as { status: string; output: unknown };
      const seen = readFileSync(keys, "utf8").trim().split("\n");
      if (flavor === "atMostOnce") {
        expect(outcome).toEqual({ status: "completed", output: { failed: "LOOM_IN_DOUBT" } });
        expect(seen).toEqual(["pay-1/charge#0"]);
      } else {
        expect(outcome).toEqual({ status: "completed", output: "charged" });
        expect(seen).toEqual(["pay-1/charge#0", "pay-1/charge#0"]);
      }
      const r = rt(sqliteStore(db), { background: false });
      const log = await r.readLog("pay-1");
      const failed = log.filter((e) => e.kind === "STEP_FAILED");
      expect(failed).toHaveLength(flavor === "atMostOnce" ? 1 : 0);
      await expectReplayEquality(r, "pay-1");
    });
  }

  it("an at-most-once step's start is durable before its code runs", async () => {
    const kindsAtRun: string[][] = [];
    const store = memoryStore();
    const once = step$(
      "once",
      async () => {
        kindsAtRun.push((await store.read("once-1")).map((e) => e.kind));
        return 1;
      },
      { atMostOnce: true },
    );
    const f = flow$("once", async (ctx) => ctx.execute(once, null));
    const r = rt(store).registerFlow(f);
    await (await r.start(f, null, { id: "once-1" })).result();
    expect(kindsAtRun).toEqual([["EXECUTION_STARTED", "STEP_STARTED"]]);
  });
});
