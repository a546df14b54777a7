/**
 * What every benchmark shares: flag parsing, JSON-line output, latency stats, a temp dir for
 * SQLite files, and a store wrapper that counts what the runtime asks of the store.
 *
 * Invariants:
 * B1. Stdout carries JSON lines only, one object per line; progress goes to stderr.
 * B2. Every SQLite file lives in a temp dir that is removed when the workload ends, also on error.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Store } from "../src/store/spi.ts";

export type Field = string | number | boolean | null | { [key: string]: Field };
export type Fields = Record<string, Field>;

/** One JSON line on stdout (B1); a field may be an object of fields (a baseline beside a figure). */
export function emit(fields: Fields): void {
  process.stdout.write(`${JSON.stringify(fields)}\n`);
}

/** A progress line on stderr. */
export function note(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** `--name value` flags; anything unknown or malformed is a UsageError. */
export function parseFlags(argv: readonly string[], known: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i] ?? "";
    const value = argv[i + 1];
    const name = flag.startsWith("--") ? flag.slice(2) : "";
    if (!known.includes(name)) throw new UsageError(`unknown flag ${JSON.stringify(flag)}`);
    if (value === undefined || value.startsWith("--")) {
      throw new UsageError(`flag ${flag} needs a value`);
    }
    out.set(name, value);
  }
  return out;
}

export function intFlag(flags: Map<string, string>, name: string, fallback: number): number {
  const raw = flags.get(name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new UsageError(`--${name} needs a positive integer, got ${JSON.stringify(raw)}`);
  }
  return n;
}

export function choiceFlag<T extends string>(
  flags: Map<string, string>,
  name: string,
  choices: readonly T[],
  fallback: T,
): T {
  const raw = flags.get(name);
  if (raw === undefined) return fallback;
  const found = choices.find((c) => c === raw.toUpperCase() || c === raw.toLowerCase());
  if (found === undefined) {
    throw new UsageError(`--${name} is one of ${choices.join("|")}, got ${JSON.stringify(raw)}`);
  }
  return found;
}

export const nowMs = (): number => performance.now();

/** CPU time (user + system) this process has used, in ms. */
export const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

export const round = (x: number, digits = 2): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

export interface LatencyStats {
  p50Us: number;
  meanUs: number;
  p99Us: number;
  maxUs: number;
}

/** Nearest-rank percentiles of samples in milliseconds, reported in microseconds. */
export function latencyStats(samplesMs: ArrayLike<number>): LatencyStats {
  const sorted = Array.from(samplesMs).sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
  const mean = sorted.reduce((s, x) => s + x, 0) / sorted.length;
  return {
    p50Us: round(at(0.5) * 1000, 1),
    meanUs: round(mean * 1000, 1),
    p99Us: round(at(0.99) * 1000, 1),
    maxUs: round(at(1) * 1000, 1),
  };
}

/** Runs `fn` with a fresh temp dir and removes the dir afterwards (B2). */
export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "loom-bench-"));
  try {
    return await fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * What a runtime asked of its store, and the time the calls took. Both stores do their work
 * synchronously inside the call (the SPI has a snapshot copied before it first yields), so the
 * time is measured around the call, not to the promise's settlement.
 */
export interface StoreCounts {
  events: number;
  appendMs: number;
  acquires: number;
  releases: number;
  leaseMs: number;
  snapshots: number;
  snapshotMs: number;
}

export interface CountingStore {
  store: Store;
  counts: StoreCounts;
  /** Called when the runtime releases a lease (a run parked or ended). */
  onRelease: (() => void) | undefined;
}

/**
 * Wraps a store (whose methods are closures, so spreading keeps them) to count calls. With
 * `untilSettled`, a call is timed until its promise settles: a store whose work is a round trip
 * to a server (PostgreSQL) does it after the call returns.
 */
export function countingStore(inner: Store, opts: { untilSettled?: boolean } = {}): CountingStore {
  const counts: StoreCounts = {
    events: 0,
    appendMs: 0,
    acquires: 0,
    releases: 0,
    leaseMs: 0,
    snapshots: 0,
    snapshotMs: 0,
  };
  const timed = <T>(field: "appendMs" | "leaseMs" | "snapshotMs", call: () => T): T => {
    const t0 = nowMs();
    const add = () => {
      counts[field] += nowMs() - t0;
    };
    let result: T;
    try {
      result = call();
    } catch (e) {
      add();
      throw e;
    }
    if (opts.untilSettled && result instanceof Promise) {
      void result.then(add, add);
    } else {
      add();
    }
    return result;
  };
  const out: CountingStore = { store: inner, counts, onRelease: undefined };
  out.store = {
    ...inner,
    appendMany(batches) {
      for (const b of batches) {
        counts.events += b.events.length;
        // Snapshots ride their batch (S9); their time is part of the append's.
        if (b.snapshot) counts.snapshots++;
      }
      return timed("appendMs", () => inner.appendMany(batches));
    },
    acquireLease(id, owner, opts) {
      counts.acquires++;
      return timed("leaseMs", () => inner.acquireLease(id, owner, opts));
    },
    releaseLease(id, owner, fence) {
      counts.releases++;
      out.onRelease?.();
      return timed("leaseMs", () => inner.releaseLease(id, owner, fence));
    },
    saveSnapshot(id, snapshot) {
      counts.snapshots++;
      return timed("snapshotMs", () => inner.saveSnapshot(id, snapshot));
    },
  };
  return out;
}
