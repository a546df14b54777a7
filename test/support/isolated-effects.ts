/**
 * Effects the isolated-executor tests run in child processes. The child imports this module to
 * find them, so it does nothing else when imported.
 */
import { writeFileSync } from "node:fs";
import { isolated, step$ } from "../../src/index.ts";

const here = { module: import.meta.url };

/** Allocates and touches `mb` megabytes, then answers with what it held. */
export const hog = isolated(
  step$("hog", async (mb: number) => {
    const block = Buffer.alloc(mb * 1024 * 1024, 1);
    return block.length;
  }),
  here,
);

/** Meters what it was told and echoes the ids it ran under. */
export const echo = isolated(
  step$("echo", async (text: string, ectx) => {
    ectx.meter({ tokens: { input: text.length, output: 1 } });
    return { text, pid: process.pid, key: ectx.idempotencyKey, attempt: ectx.attempt };
  }),
  here,
);

/** Writes its pid, ignores SIGTERM and its signal, and spins forever. */
export const spin = isolated(
  step$("spin", async (pidFile: string) => {
    process.on("SIGTERM", () => undefined);
    writeFileSync(pidFile, String(process.pid));
    for (;;) {
      // A busy loop: no await, so neither the signal nor a SIGTERM handler ever runs.
    }
  }),
  { ...here, killGraceMs: 300 },
);

/** Dies without answering. */
export const crash = isolated(
  step$("crash", async (code: number) => {
    process.exit(code);
  }),
  here,
);

/** Fails like ordinary code. */
export const fails = isolated(
  step$("fails", async (message: string) => {
    throw new TypeError(message);
  }),
  here,
);

/** Answers with `n` bytes of text. */
export const big = isolated(
  step$("big", async (n: number) => "x".repeat(n)),
  here,
);

/** Writes its pid and waits for its signal, as well-behaved I/O does. */
export const waits = isolated(
  step$("waits", async (pidFile: string, ectx) => {
    writeFileSync(pidFile, String(process.pid));
    await new Promise((_, reject) =>
      ectx.signal.addEventListener("abort", () => reject(new Error("aborted"))),
    );
  }),
  here,
);

/** Answers with something that has no JSON form. */
export const unrepresentable = isolated(
  step$("unrepresentable", async () => new Map([["a", 1]])),
  here,
);
