/**
 * What a durable model call records, and how it is read back (model.ts): the call's options as
 * its step's input, and its result (`doGenerate`) or its stream's parts (`doStream`) as its
 * step's output. The live call hands the SDK the same read-back form a replay does, so a flow
 * sees the same values either way.
 *
 * Invariants (tests cite AR1..AR4):
 * AR1. The recorded input is the call's options as JSON without what is the process's, not the
 *      call's: its abort signal and its headers (which may carry keys). File bytes are recorded
 *      by their size and digest, not their content: the step's input names the call, and a
 *      replay answers it from its output.
 * AR2. A result's file bytes are recorded as base64 (the spec's string form of the same data);
 *      dates as ISO text, read back as Dates; the raw request and response bodies and headers
 *      are not recorded (the provider's wire form, large, and the result holds what it says).
 * AR3. Consecutive deltas of one block (text, reasoning, tool input) are recorded as one, their
 *      texts joined: the parts read back say what the stream said, in fewer pieces.
 * AR4. An `error` part is recorded as the error's data (kernel/errors.ts) and read back as that
 *      error.
 */
import { createHash } from "node:crypto";
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { errorFromData, errorToData } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";

/** AR1: the call's options as its step records them. */
export function recordedOptions(options: LanguageModelV4CallOptions): Json {
  const { abortSignal: _signal, headers: _headers, ...rest } = options;
  return JSON.parse(JSON.stringify(rest, bytesByDigest)) as Json;
}

function bytesByDigest(_key: string, value: unknown): unknown {
  if (value instanceof Uint8Array) {
    const sha256 = createHash("sha256").update(value).digest("hex");
    return { bytes: value.byteLength, sha256 };
  }
  return value;
}

/** AR2: file bytes as base64, the rest as JSON (dates as ISO text). */
function jsonOf(value: unknown): Json {
  return JSON.parse(
    JSON.stringify(value, (_key, v: unknown) =>
      v instanceof Uint8Array ? Buffer.from(v).toString("base64") : v,
    ),
  ) as Json;
}

/** AR2: a generate result as its step records it. */
export function recordedResult(result: LanguageModelV4GenerateResult): Json {
  const { request: _request, response, ...rest } = result;
  const meta =
    response === undefined
      ? {}
      : {
          response: {
            ...(response.id === undefined ? {} : { id: response.id }),
            ...(response.timestamp === undefined ? {} : { timestamp: response.timestamp }),
            ...(response.modelId === undefined ? {} : { modelId: response.modelId }),
          },
        };
  return jsonOf({ ...rest, ...meta });
}

/** AR2: a recorded generate result as the SDK takes it. */
export function resultFrom(json: Json): LanguageModelV4GenerateResult {
  const result = json as unknown as LanguageModelV4GenerateResult;
  const at = result.response?.timestamp as unknown;
  if (typeof at === "string" && result.response) result.response.timestamp = new Date(at);
  return result;
}

/** AR3: joins `part` onto the last one when both are deltas of one block. */
export function pushPart(
  parts: LanguageModelV4StreamPart[],
  part: LanguageModelV4StreamPart,
): void {
  const last = parts.at(-1);
  if (
    last !== undefined &&
    isDelta(last) &&
    isDelta(part) &&
    last.type === part.type &&
    last.id === part.id &&
    last.providerMetadata === undefined &&
    part.providerMetadata === undefined
  ) {
    parts[parts.length - 1] = { ...last, delta: last.delta + part.delta };
    return;
  }
  parts.push(part);
}

type DeltaPart = Extract<
  LanguageModelV4StreamPart,
  { type: "text-delta" | "reasoning-delta" | "tool-input-delta" }
>;

function isDelta(part: LanguageModelV4StreamPart): part is DeltaPart {
  return (
    part.type === "text-delta" ||
    part.type === "reasoning-delta" ||
    part.type === "tool-input-delta"
  );
}

/** AR2, AR4: stream parts as their step records them. */
export function recordedParts(parts: readonly LanguageModelV4StreamPart[]): Json {
  return jsonOf(
    parts.map((p) => (p.type === "error" ? { type: "error", error: errorToData(p.error) } : p)),
  );
}

/** AR2, AR4: recorded parts as the SDK takes them. */
export function partsFrom(json: Json): LanguageModelV4StreamPart[] {
  return (json as unknown as LanguageModelV4StreamPart[]).map((p) => {
    if (p.type === "error") return { type: "error", error: errorFromData(p.error) };
    if (p.type === "response-metadata" && typeof (p.timestamp as unknown) === "string") {
      return { ...p, timestamp: new Date(p.timestamp as unknown as string) };
    }
    return p;
  });
}

/** A stream of recorded parts, as `doStream` returns it. */
export function streamOf(
  parts: readonly LanguageModelV4StreamPart[],
): ReadableStream<LanguageModelV4StreamPart> {
  return new ReadableStream({
    start(controller) {
      for (const p of parts) controller.enqueue(p);
      controller.close();
    },
  });
}
