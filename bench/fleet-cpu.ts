/**
 * CPU accounting for the `fleet` benchmark (bench/fleet.ts): what a round cost, in cores busy
 * (CPU time over wall time), counted two ways.
 *
 * - machine: every process on the machine (/proc/stat), so other work loading the shared cores is
 *   counted too;
 * - fleet: the worker processes and the PostgreSQL backends serving them only (/proc/<pid>/stat,
 *   user + system), the backends found in `pg_stat_activity` by the application name the workers
 *   connect with (PGAPPNAME). A backend that opened during the round counts from zero. The
 *   server's shared processes (WAL writer, checkpointer, background writer, autovacuum) serve
 *   every database on the server, so they are reported apart (`pgShared`), not in the fleet's.
 */
import { readFileSync } from "node:fs";
import type pg from "pg";

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU time the whole machine spent busy (user, nice, system, irq, softirq), in ms, or NaN. */
export function machineCpuMs(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const [, user, nice, system, , , irq, softirq] = line.trim().split(/\s+/).map(Number);
  const ticks = (user ?? NaN) + (nice ?? NaN) + (system ?? NaN) + (irq ?? NaN) + (softirq ?? NaN);
  return ticks * TICK_MS;
}

/** User + system CPU time of one process in ms, or NaN once it is gone. */
export function processCpuMs(pid: number): number {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return NaN;
  }
  // The command name is in parentheses and may hold spaces: the fields follow its last `)`.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** A sample of each process's CPU time, by pid. */
type Sample = Map<number, number>;

function sample(pids: readonly number[]): Sample {
  return new Map(pids.map((pid) => [pid, processCpuMs(pid)]));
}

/**
 * CPU ms spent between two samples; a pid only in `after` started meanwhile, from zero; one gone
 * by `after` (a pool's idle connection closed) is not counted.
 */
function spent(before: Sample, after: Sample): number {
  let ms = 0;
  for (const [pid, cpu] of after) if (!Number.isNaN(cpu)) ms += cpu - (before.get(pid) ?? 0);
  return ms;
}

export interface RoundCpu {
  /** Every process on the machine. */
  machineMs: number;
  /** The worker processes. */
  workersMs: number;
  /** The backends serving them. */
  backendsMs: number;
  /** The server's shared processes. */
  pgSharedMs: number;
}

/** Measures the CPU of rounds of a fleet whose workers connect as `appName`. */
export class FleetCpu {
  private machine0 = 0;
  private workers0: Sample = new Map();
  private backends0: Sample = new Map();
  private shared0: Sample = new Map();

  constructor(
    private readonly admin: pg.ClientBase,
    private readonly workerPids: readonly number[],
    private readonly appName: string,
  ) {}

  private async backends(): Promise<{ fleet: number[]; shared: number[] }> {
    const { rows } = await this.admin.query<{ pid: number; fleet: boolean }>(
      `SELECT pid, application_name = $1 AS fleet FROM pg_stat_activity
       WHERE application_name = $1 OR backend_type IN
         ('walwriter', 'checkpointer', 'background writer', 'autovacuum worker')`,
      [this.appName],
    );
    return {
      fleet: rows.filter((r) => r.fleet).map((r) => r.pid),
      shared: rows.filter((r) => !r.fleet).map((r) => r.pid),
    };
  }

  async start(): Promise<void> {
    const { fleet, shared } = await this.backends();
    this.workers0 = sample(this.workerPids);
    this.backends0 = sample(fleet);
    this.shared0 = sample(shared);
    this.machine0 = machineCpuMs();
  }

  async stop(): Promise<RoundCpu> {
    const machineMs = machineCpuMs() - this.machine0;
    const workersAfter = sample(this.workerPids);
    const { fleet, shared } = await this.backends();
    const backendsAfter = sample([...new Set([...this.backends0.keys(), ...fleet])]);
    const sharedAfter = sample([...new Set([...this.shared0.keys(), ...shared])]);
    return {
      machineMs,
      workersMs: spent(this.workers0, workersAfter),
      backendsMs: spent(this.backends0, backendsAfter),
      pgSharedMs: spent(this.shared0, sharedAfter),
    };
  }
}
