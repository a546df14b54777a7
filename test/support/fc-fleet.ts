/**
 * The flow-control fleet's members (test/fixtures/flow-control/worker.ts) for the tests and
 * bench/ratelimit.ts: each a process of its own (processes.ts P1..P3), ready once it prints its
 * owner id; and what its logs say about queues: each execution's admission and end.
 */
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import type { Envelope } from "../../src/kernel/events.ts";
import { spawn } from "./processes.ts";

const root = join(import.meta.dirname, "../..");

export interface FcMember {
  child: ChildProcess;
  out: string;
  owner: string;
}

/** A member over `schema` with `env` added (LOOM_FC_*, LOOM_FAKE_OPENAI ...). */
export function startFcMember(
  url: string,
  schema: string,
  env: Record<string, string>,
): Promise<FcMember> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(root, "test/fixtures/flow-control/worker.ts")],
    {
      cwd: root,
      env: { ...process.env, LOOM_PG_URL: url, LOOM_FLEET_SCHEMA: schema, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const member: FcMember = { child, out: "", owner: "" };
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

/** When an execution held a slot of its queue, by its log: from its admission to its end. */
export interface Slot {
  id: string;
  key: string;
  from: number;
  to: number;
}

/** The slot `log` held, or a reason it is not one (never admitted, never ended). */
export function slotOf(id: string, key: string, log: readonly Envelope[]): Slot | string {
  const admitted = log.filter((e) => e.kind === "EXECUTION_ADMITTED");
  const end = log[log.length - 1];
  if (admitted.length !== 1 || !admitted[0]) return `${id}: ${admitted.length} admissions`;
  if (end?.kind !== "EXECUTION_COMPLETED") return `${id}: ends with ${end?.kind}`;
  return { id, key, from: admitted[0].at, to: end.at };
}

/** The most slots held at one instant, in all and of one key (a sweep over the intervals). */
export function mostAtOnce(slots: readonly Slot[]): { all: number; perKey: number } {
  const edges = slots.flatMap((s) => [
    { at: s.from, d: 1, key: s.key },
    // An end at the same instant as an admission frees the slot first.
    { at: s.to, d: -1, key: s.key },
  ]);
  edges.sort((a, b) => a.at - b.at || a.d - b.d);
  let all = 0;
  let most = 0;
  let mostKey = 0;
  const byKey = new Map<string, number>();
  for (const e of edges) {
    all += e.d;
    const k = (byKey.get(e.key) ?? 0) + e.d;
    byKey.set(e.key, k);
    most = Math.max(most, all);
    mostKey = Math.max(mostKey, k);
  }
  return { all: most, perKey: mostKey };
}
