/**
 * Issue 9's fleet chaos (runtime/fleet.ts L1..L4): 3 worker processes on one PostgreSQL run 1,000
 * executions of a 20-step flow; one is killed with SIGKILL mid-run, one is paused past its
 * leases (a zombie) and resumed, later another is killed; replacements join. Every execution
 * completes, every step is completed exactly once, no log has a duplicate or a gap, and no
 * execution is driven by two owners at once: in every log the fences never go back (an owner
 * whose lease was taken over appends nothing after the new owner's first append), and what a
 * zombie tried to append was refused as stale.
 */
import type { ChildProcess } from "node:child_process";
import { spawn } from "./support/processes.ts";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createRuntime, type Runtime } from "../src/index.ts";
import type { Envelope } from "../src/kernel/events.ts";
import type { Store } from "../src/store/spi.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { twenty } from "./fixtures/fleet/flows.ts";
import { until } from "./helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { slow } from "./support/slowdown.ts";

const root = join(import.meta.dirname, "..");
const EXECUTIONS = 1000;
const STEPS = 20;
const TTL_MS = 1500;

interface Member {
  child: ChildProcess;
  out: string;
  /** Its runtime's owner id, as it printed it when ready. */
  owner: string;
}

const members: Member[] = [];
afterAll(() => {
  for (const m of members) m.child.kill("SIGKILL");
});

function startMember(url: string, schema: string): Promise<Member> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(root, "test/fixtures/fleet/worker.ts")],
    {
      cwd: root,
      env: {
        ...process.env,
        LOOM_PG_URL: url,
        LOOM_FLEET_SCHEMA: schema,
        LOOM_FLEET_TTL_MS: String(TTL_MS),
        LOOM_FLEET_MAX_ACTIVE: "40",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const member: Member = { child, out: "", owner: "" };
  members.push(member);
  child.stdout?.on("data", (d: Buffer) => (member.out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => process.stderr.write(d));
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`a fleet member exited early (${code})`)));
    const ready = setInterval(() => {
      const owner = /ready (\S+)/.exec(member.out)?.[1];
      if (owner === undefined) return;
      clearInterval(ready);
      member.owner = owner;
      resolve(member);
    }, 20);
  });
}

/** SIGTERM; what it reports: stale appends refused, runs stopped as taken over. */
async function stopMember(m: Member): Promise<{ appends: number; runs: number }> {
  const exited = new Promise((resolve) => m.child.once("exit", resolve));
  m.child.kill("SIGTERM");
  await exited;
  const [, appends, runs] = /fenced (\d+) runs (\d+)/.exec(m.out) ?? [];
  return { appends: Number(appends ?? NaN), runs: Number(runs ?? NaN) };
}

const progress = (what: string) => process.stderr.write(`fleet: ${what}\n`);

async function completed(runtime: Runtime): Promise<number> {
  let n = 0;
  let afterId: string | undefined;
  for (;;) {
    const page = await runtime.list({
      status: ["completed"],
      limit: 500,
      ...(afterId ? { afterId } : {}),
    });
    n += page.length;
    if (page.length < 500) return n;
    afterId = page[page.length - 1]?.executionId;
  }
}

/** Unexpired leases on running executions, by owner. */
async function owners(store: Store): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const x of await store.list({ status: ["running"], limit: 2000 })) {
    const l = await store.getLease(x.executionId);
    if (l?.owner === undefined || l.expiresAtMs <= Date.now()) continue;
    out.set(l.owner, (out.get(l.owner) ?? 0) + 1);
  }
  return out;
}

const counts = (held: Map<string, number>) => JSON.stringify(Object.fromEntries(held));

/** What one log breaks of the fleet's invariants (empty when none). */
function problems(id: string, log: readonly Envelope[]): string[] {
  const out: string[] = [];
  log.forEach((e, i) => e.seq !== i && out.push(`${id}: sequence ${e.seq} at ${i}`));
  const done = log.filter((e) => e.kind === "STEP_COMPLETED").map((e) => e.payload);
  const calls = done.map((p) => (p as { callId?: string }).callId);
  if (calls.length !== STEPS || new Set(calls).size !== STEPS) {
    out.push(`${id}: ${calls.length} STEP_COMPLETED for ${new Set(calls).size} steps`);
  }
  const ends = log.filter((e) => e.kind === "EXECUTION_COMPLETED");
  if (ends.length !== 1 || log[log.length - 1]?.kind !== "EXECUTION_COMPLETED") {
    out.push(`${id}: ${ends.length} EXECUTION_COMPLETED, last ${log[log.length - 1]?.kind}`);
  }
  let fence = 0;
  for (const e of log) {
    const f = e.meta?.fence ?? 0;
    if (f < fence) out.push(`${id}: fence ${f} appended at ${e.seq} after fence ${fence}`);
    fence = Math.max(fence, f);
  }
  return out;
}

describe("a fleet of worker processes on PostgreSQL (issue 9)", () => {
  it(
    "3 members run 1,000 executions of 20 steps through two SIGKILLs and a zombie: each completes, each step once, never two owners",
    async () => {
      const url = pgUrl();
      const schema = schemaName("fleet");
      let store: Store | undefined;
      try {
        const shared = await postgresStore({ connectionString: url, schema });
        store = shared;
        const client = createRuntime({ store: shared, background: false }).registerFlow(twenty);
        // Recorded, not driven: the members claim them (L1).
        for (let i = 0; i < EXECUTIONS; i += 50) {
          await Promise.all(
            Array.from({ length: 50 }, (_, j) =>
              client.start(
                twenty,
                { steps: STEPS, pauseMs: 40 },
                { id: `f${i + j}`, drive: false },
              ),
            ),
          );
        }
        progress("recorded");
        const fleet = await Promise.all([0, 1, 2].map(() => startMember(url, schema)));
        progress("3 members ready");
        const [first, ...rest] = fleet;
        if (!first) throw new Error("three members");

        await until(async () => (await completed(client)) >= 200, 60_000);
        first.child.kill("SIGKILL");
        progress("killed the first");
        const fourth = await startMember(url, schema);

        await until(async () => (await completed(client)) >= 400, 60_000);
        // A zombie: the live member driving the most, paused past its leases (taken over
        // meanwhile), then resumed (L2).
        const live = [...rest, fourth];
        let held = await owners(shared);
        await until(async () => {
          held = await owners(shared);
          return live.some((m) => (held.get(m.owner) ?? 0) > 0);
        }, slow(60_000));
        const most = (m: Member) => held.get(m.owner) ?? 0;
        const second = live.reduce((a, b) => (most(b) > most(a) ? b : a));
        progress(`before the pause: ${counts(held)}; the zombie drives ${most(second)}`);
        second.child.kill("SIGSTOP");
        await new Promise((resolve) => setTimeout(resolve, TTL_MS * 2));
        progress(`before the wake: ${counts(await owners(shared))}`);
        second.child.kill("SIGCONT");
        progress("the zombie woke");

        await until(async () => (await completed(client)) >= 750, 60_000);
        const third = live.find((m) => m !== second);
        if (!third) throw new Error("another live member");
        third.child.kill("SIGKILL");
        progress("killed another");
        const fifth = await startMember(url, schema);

        await until(async () => (await completed(client)) === EXECUTIONS, 120_000);
        const zombie = await stopMember(second);
        const others: { appends: number; runs: number }[] = [];
        for (const m of [...live, fifth]) {
          if (m !== second && m !== third) others.push(await stopMember(m));
        }

        const found: string[] = [];
        for (let i = 0; i < EXECUTIONS; i++) {
          const id = `f${i}`;
          found.push(...problems(id, await shared.read(id)));
        }
        expect(found).toEqual([]);
        // The zombie's runs were taken over while it slept: it stopped them when it woke (a
        // renewal or an append refused as stale), and no log shows a fence going back.
        progress(`zombie ${JSON.stringify(zombie)} others ${JSON.stringify(others)}`);
        expect(zombie.runs).toBeGreaterThan(0);
        for (const o of others) expect(o.appends).toBeGreaterThanOrEqual(0);
        const refused = zombie.appends + others.reduce((n, o) => n + o.appends, 0);
        process.stderr.write(
          `fleet: the zombie stopped ${zombie.runs} runs taken over; stale appends refused: ${refused}\n`,
        );
        await client.close();
      } finally {
        await store?.close();
        await dropSchema(url, schema);
      }
    },
    slow(300_000),
  );
});
