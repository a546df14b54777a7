/**
 * Loom's `fetch` (ADR 0032 R1): `meteredFetch(ectx)` is a `fetch` that forwards the effect's
 * signal and meters `netBytes`, the request plus the response, so an effect whose HTTP goes
 * through it (directly, or as a provider SDK's `fetch` option) reports its network use.
 *
 * What is counted: the request line, the headers the caller set and the body, and the status
 * line, headers and body of the response, framed as HTTP/1.1 would frame them. The response body
 * is counted as it is read (as the client delivers it, after any decompression), so a stream
 * that is abandoned or aborted midway is metered for what arrived. Each count reaches
 * `ectx.meter` as it happens. Not counted: headers the client adds itself, and the hops of a
 * redirect it follows (only the request and the final response are). The response handed back is
 * a new `Response` over the counted body, with the original's status, headers, `url` and
 * `redirected`.
 */
import type { EffectContext } from "./effect.ts";

type Fetch = typeof globalThis.fetch;
const encoder = new TextEncoder();

export function meteredFetch(
  ectx: Pick<EffectContext, "signal" | "meter">,
  fetchImpl: Fetch = globalThis.fetch,
): Fetch {
  return async (input, init) => {
    const meter = (bytes: number) => {
      if (bytes > 0) ectx.meter({ netBytes: bytes });
    };
    const asRequest = input instanceof Request ? input : undefined;
    const own = init?.signal ?? asRequest?.signal;
    const signal = own ? AbortSignal.any([ectx.signal, own]) : ectx.signal;
    const method = init?.method ?? asRequest?.method ?? "GET";
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const headers = new Headers(init?.headers ?? asRequest?.headers);
    meter(headBytes(`${method.toUpperCase()} ${pathOf(url)} HTTP/1.1`, headers));
    // A body of known length is counted and sent as it is (its Content-Length intact); only a
    // stream, which has no length, is counted as it flows.
    let sent: RequestInit = { ...init, signal };
    const body = init?.body ?? null;
    if (body instanceof ReadableStream) {
      const counted: RequestInit & { duplex: "half" } = {
        ...sent,
        body: body.pipeThrough(counter(meter)),
        duplex: "half",
      };
      sent = counted;
    } else if (body !== null) {
      meter(await bodyBytes(body));
    } else if (asRequest?.body) {
      meter((await asRequest.clone().arrayBuffer()).byteLength);
    }
    const response = await fetchImpl(input, sent);
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

/** The byte length of a body that is not a stream, without consuming it. */
async function bodyBytes(body: NonNullable<RequestInit["body"]>): Promise<number> {
  if (typeof body === "string") return encoder.encode(body).byteLength;
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return body.byteLength;
  if (body instanceof Blob) return body.size;
  if (body instanceof URLSearchParams) return encoder.encode(body.toString()).byteLength;
  // FormData and anything else: as the client would encode it.
  return (await new Response(body).arrayBuffer()).byteLength;
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
