/**
 * `npm run bench -- codec [--events 20000] [--rounds 5] [--bytes 300]`: the per-event cost of the
 * audit chain (hashing) and of the payload codec (AES-256-GCM) beside neither, in the same run
 * (issue 10).
 *
 * One flow runs N fast steps, each returning a `--bytes`-long text, on the memory store (so the
 * figure is the sealing's, not a disk's): once plain, once with `audit: true`, once with
 * `aesGcmCodec`. A fast step is one event, so per step is per event. Rounds alternate the three
 * and the summary compares medians; `hashAddedUs` and `encryptAddedUs` are the differences.
 */
import { randomBytes } from "node:crypto";
import {
  aesGcmCodec,
  createRuntime,
  flow$,
  memoryStore,
  type RuntimeOptions,
} from "../src/index.ts";
import { emit, intFlag, median, note, parseFlags } from "./lib.ts";

type Mode = "plain" | "hash" | "encrypt";

const codec = aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" });

async function perEventUs(events: number, bytes: number, mode: Mode): Promise<number> {
  const text = "x".repeat(bytes);
  const f = flow$("sealed", async (ctx) => {
    let n = 0;
    for (let i = 0; i < events; i++) n += (await ctx.run("tool", () => `${i}:${text}`)).length;
    return n;
  });
  const options: RuntimeOptions = { store: memoryStore(), background: false, middleware: [] };
  if (mode === "hash") options.audit = true;
  if (mode === "encrypt") options.codec = codec;
  const runtime = createRuntime(options);
  const t0 = performance.now();
  await (await runtime.start(f, null)).result();
  const us = ((performance.now() - t0) * 1000) / events;
  await runtime.close();
  return us;
}

export async function codecBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["events", "rounds", "bytes"]);
  const events = intFlag(flags, "events", 20_000);
  const rounds = intFlag(flags, "rounds", 5);
  const bytes = intFlag(flags, "bytes", 300);
  note(`codec: ${events} events of ${bytes} bytes, ${rounds} rounds, warming up`);
  for (const mode of ["plain", "hash", "encrypt"] as const) await perEventUs(2000, bytes, mode);
  const runs: Record<Mode, number[]> = { plain: [], hash: [], encrypt: [] };
  for (let round = 1; round <= rounds; round++) {
    for (const mode of ["plain", "hash", "encrypt"] as const) {
      runs[mode].push(await perEventUs(events, bytes, mode));
    }
    emit({
      name: "codec",
      phase: "round",
      round,
      plainUs: round2(runs.plain.at(-1)),
      hashUs: round2(runs.hash.at(-1)),
      encryptUs: round2(runs.encrypt.at(-1)),
    });
  }
  const plainUs = median(runs.plain);
  const hashUs = median(runs.hash);
  const encryptUs = median(runs.encrypt);
  emit({
    name: "codec",
    plainUs: round2(plainUs),
    hashUs: round2(hashUs),
    encryptUs: round2(encryptUs),
    hashAddedUs: round2(hashUs - plainUs),
    encryptAddedUs: round2(encryptUs - plainUs),
    events,
    bytes,
    rounds,
  });
}

function round2(x: number | undefined): number {
  return Math.round((x ?? 0) * 100) / 100;
}
