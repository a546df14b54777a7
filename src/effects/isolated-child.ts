/**
 * The child process of an isolated effect (isolated.ts): imports the module that defines the
 * effect, runs it once, reports its result and peak RSS, and exits. SIGTERM aborts the effect's
 * signal and exits shortly after; the parent follows with SIGKILL if this process does not go.
 */
import { errorToData, InvalidInputError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Effect, EffectContext } from "../runtime/flow.ts";
import { INNER, type ChildReply, type ChildRequest } from "./isolated-protocol.ts";

const controller = new AbortController();
process.on("SIGTERM", () => {
  controller.abort(new Error("the isolated effect was aborted"));
  setTimeout(() => process.exit(143), 50);
});
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
    };
    const output = (await effect.run(request.input, ectx)) as Json;
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

/** Peak resident set of this process, in bytes (getrusage reports kilobytes). */
function maxRss(): number {
  return process.resourceUsage().maxRSS * 1024;
}

function send(message: ChildReply, then?: () => void): void {
  process.send?.(message, undefined, undefined, () => then?.());
}
