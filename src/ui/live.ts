/**
 * `GET /api/executions/:id/live?from=<seq>`: server-sent events that follow an execution's log.
 *
 * Each `update` event carries the events from `from` on that the client has not had (with their
 * timeline rows) and the projection they change (summary and status, folded state, bars,
 * resources, lineage and applicable actions: detail.ts D4) and `nowMs`; its SSE id is the last sequence number sent, so a reconnecting
 * EventSource (`Last-Event-ID`) resumes after it. An `end` event follows once the execution has
 * ended and everything was sent; then the stream closes.
 *
 * Invariants (tests cite E1..E4):
 * E1. The caller is authorized once, when the stream opens (the state is read through the
 *     runtime); an unknown id or another principal's gets its JSON error, not a stream.
 * E2. A stream costs one `store.head` per poll (every `pollMs`, 250 ms by default) while the log
 *     does not grow, and reads only the new tail when it does; polls of one stream never overlap.
 * E3. Every event of the log from `from` on is sent once, in order, as long as the stream stays
 *     open; the state sent is the fold of the log up to the last event sent.
 * E4. `closeAll` ends every stream at once (the server's close): no poll runs after it.
 * E5. Bounded: at most MAX_STREAMS streams are open (another is refused with 503), and a stream
 *     whose client stopped reading (more than MAX_BUFFERED_BYTES waiting) is closed; its
 *     EventSource reconnects and resumes after the last event it had.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { timeline } from "../analytics/timeline.ts";
import { isTerminalStatus, type Envelope } from "../kernel/events.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { catchUp, projectionOf } from "./detail.ts";
import { HttpRefusal, SECURITY_HEADERS } from "./http.ts";

export const LIVE_POLL_MS = 250;
/** E5. */
export const MAX_STREAMS = 64;
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** A comment line this often keeps proxies and the browser from dropping an idle stream. */
const HEARTBEAT_MS = 15_000;

export class LiveStreams {
  private readonly open = new Set<() => void>();

  constructor(private readonly pollMs = LIVE_POLL_MS) {}

  /** Serves one stream (E1..E3); throws before the headers are sent when the id is refused. */
  async serve(
    runtime: Runtime,
    id: string,
    from: number | undefined,
    req: IncomingMessage,
    res: ServerResponse,
    readOnly = false,
  ): Promise<void> {
    if (this.open.size >= MAX_STREAMS) {
      throw new HttpRefusal(503, "LOOM_TOO_MANY_STREAMS", `at most ${MAX_STREAMS} live streams`);
    }
    const loaded = await runtime.getState(id);
    const events = await runtime.readLog(id);
    const state = catchUp(loaded, events);
    const lastId = req.headers["last-event-id"];
    const resumeAfter =
      typeof lastId === "string" && /^\d{1,15}$/.test(lastId) ? Number(lastId) : NaN;
    let sent = Number.isSafeInteger(resumeAfter) ? resumeAfter : (from ?? state.seq + 1) - 1;
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-store",
      Connection: "keep-alive",
      "X-Accel-Buffering": "no",
    });
    res.write("retry: 1000\n\n");
    let timer: NodeJS.Timeout | undefined;
    let lastBeatMs = performance.now();
    const stop = () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      this.open.delete(stop);
      if (!res.writableEnded) res.end();
    };
    this.open.add(stop);
    res.on("close", stop);
    /** Sends what is new; false once the stream ended with the execution. */
    const flush = async (): Promise<boolean> => {
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        stop(); // E5: the client stopped reading
        return false;
      }
      const fresh = newSince(events, sent);
      if (fresh.length > 0) {
        const update = await updateOf(runtime, state, events, fresh, readOnly);
        if (!this.open.has(stop)) return false;
        sent = fresh[fresh.length - 1]?.seq ?? sent;
        res.write(`event: update\nid: ${sent}\ndata: ${JSON.stringify(update)}\n\n`);
      }
      if (!isTerminalStatus(state.status)) return true;
      res.write(`event: end\ndata: {}\n\n`);
      stop();
      return false;
    };
    const poll = async (): Promise<void> => {
      timer = undefined;
      if (!this.open.has(stop)) return;
      try {
        const last = events[events.length - 1]?.seq ?? -1;
        const head = await runtime.store.head(id);
        if (head < 0) return stop(); // released by retention meanwhile
        if (head > last) {
          const tail = await runtime.store.read(id, last + 1);
          events.push(...tail);
          catchUp(state, tail);
          if (!this.open.has(stop) || !(await flush())) return;
        }
        if (performance.now() - lastBeatMs >= HEARTBEAT_MS) {
          res.write(": ping\n\n");
          lastBeatMs = performance.now();
        }
      } catch {
        return stop();
      }
      timer = setTimeout(() => void poll(), this.pollMs);
    };
    if (await flush()) timer = setTimeout(() => void poll(), this.pollMs);
  }

  /** E4 */
  closeAll(): void {
    for (const stop of [...this.open]) stop();
  }
}

async function updateOf(
  runtime: Runtime,
  state: ExecutionState,
  events: readonly Envelope[],
  fresh: readonly Envelope[],
  readOnly: boolean,
): Promise<unknown> {
  const rows = timeline(events);
  return {
    ...(await projectionOf(runtime, state, events, readOnly)),
    events: fresh,
    timeline: rows.slice(rows.length - fresh.length),
    nowMs: runtime.clock.now(),
  };
}

/** The events after sequence number `sent`: a search from the end, since most are old. */
function newSince(events: readonly Envelope[], sent: number): Envelope[] {
  let i = events.length;
  while (i > 0 && (events[i - 1]?.seq ?? -1) > sent) i--;
  return events.slice(i);
}
