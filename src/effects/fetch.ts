/**
 * Loom's `fetch` (ADR 0032 R1): `meteredFetch(ectx)` is a `fetch` that forwards the effect's
 * signal and meters `netBytes`, the request plus the response, so an effect whose HTTP goes
 * through it (directly, or as a provider SDK's `fetch` option) reports its network use.
 *
 * What is counted: the request line, headers and body, and the status line, headers and body of
 * the response, framed as HTTP/1.1 would frame them. The response body is counted as it is read
 * (as the client delivers it, after any decompression), so a stream that is abandoned or aborted
 * midway is metered for what arrived. Each count reaches `ectx.meter` as it happens.
 */
import type { EffectContext } from "../runtime/flow.ts";

type Fetch = typeof globalThis.fetch;
const encoder = new TextEncoder();

export function meteredFetch(
  ectx: Pick<EffectContext, "signal" | "meter">,
  fetchImpl: Fetch = globalThis.fetch,
): Fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const signal = AbortSignal.any([ectx.signal, request.signal]);
    const meter = (bytes: number) => {
      if (bytes > 0) ectx.meter({ netBytes: bytes });
    };
    let body: ReadableStream<Uint8Array> | null = request.body;
    if (body) body = body.pipeThrough(counter(meter));
    meter(headBytes(`${request.method} ${pathOf(request.url)} HTTP/1.1`, request.headers));
    const sent = new Request(request, {
      signal,
      body,
      ...(body ? { duplex: "half" } : {}),
    });
    const response = await fetchImpl(sent);
    meter(headBytes(`HTTP/1.1 ${response.status} ${response.statusText}`, response.headers));
    if (!response.body) return response;
    const counted = new Response(response.body.pipeThrough(counter(meter)), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    Object.defineProperty(counted, "url", { value: response.url });
    Object.defineProperty(counted, "redirected", { value: response.redirected });
    return counted;
  };
}

/** A pass-through stream that reports the size of every chunk. */
function counter(meter: (bytes: number) => void): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, controller) {
      meter(chunk.byteLength);
      controller.enqueue(chunk);
    },
  });
}

/** A start line and headers as HTTP/1.1 frames them (CRLF after each, and a blank line). */
function headBytes(startLine: string, headers: Headers): number {
  let text = `${startLine}\r\n`;
  headers.forEach((value, name) => (text += `${name}: ${value}\r\n`));
  return encoder.encode(`${text}\r\n`).byteLength;
}

function pathOf(url: string): string {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}
