/**
 * The child process of an isolated effect (isolated.ts): imports the module that defines the
 * effect, runs it once, reports its result and peak RSS, and exits. SIGTERM aborts the effect's
 * signal and exits shortly after; the parent follows with SIGKILL if this process does not go.
 * Losing the parent (its IPC channel closes: it exited or was killed) does the same, so a child
 * whose effect heeds its signal does not outlive its parent; one that spins without yielding
 * does, until it ends (a residual: Node offers no parent-death signal).
 */
import { readFileSync } from "node:fs";
import { errorToData, InvalidInputError } from "../kernel/errors.ts";
import { toJson, type Json } from "../kernel/json.ts";
import type { Effect, EffectContext } from "./effect.ts";
import { INNER, type ChildReply, type ChildRequest } from "./isolated-protocol.ts";

const controller = new AbortController();
const stop = (why: string, code: number) => {
  controller.abort(new Error(why));
  setTimeout(() => process.exit(code), 50);
};
process.on("SIGTERM", () => stop("the isolated effect was aborted", 143));
process.on("disconnect", () => stop("the parent of the isolated effect went away", 129));
process.once("message", (request: ChildRequest) => {
  void run(request);
});

async function run(request: ChildRequest): Promise<void> {
  let reply: ChildReply;
  try {
    const effect = await find(request);
    const ectx: EffectContext = {
      executionId: request.executionId,
      stepId: request.stepId,
      attempt: request.attempt,
      idempotencyKey: request.idempotencyKey,
      signal: controller.signal,
      resources: request.resources,
      meter: (delta) => send({ type: "meter", delta: delta as unknown as Json }),
      // A killed child is metered by its parent from the sampled memory and wall time.
      provisional: () => undefined,
    };
    const value = await effect.run(request.input, ectx);
    const output = toJson(value, `output of isolated effect "${request.name}"`) ?? null;
    reply = { type: "done", output, maxRssBytes: maxRss() };
  } catch (e) {
    reply = { type: "failed", error: errorToData(e), maxRssBytes: maxRss() };
  }
  send(reply, () => process.exit(0));
}

/** The effect the parent named: by export name, or the one exported effect with its name. */
async function find(request: ChildRequest): Promise<Effect<Json, unknown>> {
  const mod = (await import(request.module)) as Record<string, unknown>;
  const candidates = request.export === undefined ? Object.values(mod) : [mod[request.export]];
  const found = new Set<Effect<Json, unknown>>();
  for (const value of candidates) {
    if (!isEffect(value) || value.name !== request.name) continue;
    const inner: unknown = (value as { [INNER]?: unknown })[INNER];
    found.add(isEffect(inner) ? inner : value);
  }
  const [effect, ...more] = found;
  if (!effect || more.length > 0) {
    throw new InvalidInputError(
      `${request.module} exports ${found.size === 0 ? "no" : "more than one"} effect named "${request.name}"${request.export === undefined ? "" : ` as "${request.export}"`}: export it, or name the export with { export }`,
    );
  }
  return effect;
}

function isEffect(value: unknown): value is Effect<Json, unknown> {
  return (
    value !== null &&
    typeof value === "object" &&
    typeof (value as { run?: unknown }).run === "function" &&
    typeof (value as { name?: unknown }).name === "string"
  );
}

/**
 * Peak resident set of this process, in bytes. On Linux, VmHWM: getrusage's max RSS carries over
 * across exec, so there it would report the parent's size at the fork. Elsewhere getrusage (in
 * kilobytes), which may carry that over too.
 */
function maxRss(): number {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
    if (m?.[1]) return Number(m[1]) * 1024;
  } catch {
    // not Linux
  }
  return process.resourceUsage().maxRSS * 1024;
}

function send(message: ChildReply, then?: () => void): void {
  process.send?.(message, undefined, undefined, () => then?.());
}
