/**
 * Fleet wakes over LISTEN/NOTIFY (S18).
 *
 * N1. One channel per schema. A writer sends its wakes with `pg_notify` inside its own
 *     transaction, so PostgreSQL delivers them on commit only, and never those of a transaction
 *     rolled back or a batch refused.
 * N2. A payload is the wake as JSON (made here, or by the append routine with json_build_object),
 *     kept under PostgreSQL's 8000-byte limit: a wake too big to send (ids of thousands of
 *     characters) is not sent. Delivery is best effort.
 * N3. One dedicated connection per store listens, opened by the first subscriber and closed with
 *     the last. If it drops it reconnects, with a growing delay, while anyone is subscribed;
 *     wakes sent while it was down are lost (a fleet member's poll covers them).
 */
import type pg from "pg";
import { pgDriver } from "./driver.ts";
import type { FleetWake } from "../spi.ts";

export const MAX_PAYLOAD_BYTES = 7999;
const RECONNECT_FIRST_MS = 50;
const RECONNECT_MAX_MS = 5000;

export function wakeChannel(schema: string): string {
  return `loom_wake:${schema}`;
}

/** The NOTIFY payload of `wake`, or undefined when it would be too big to send (N2). */
export function wakeText(wake: FleetWake): string | undefined {
  const text = JSON.stringify(wake);
  return Buffer.byteLength(text) <= MAX_PAYLOAD_BYTES ? text : undefined;
}

/** Reads a payload back; anything that is not a wake (another writer's NOTIFY) is ignored. */
export function parseWake(text: string): FleetWake | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== "object") return undefined;
  const w = v as Record<string, unknown>;
  const str = (k: string) => typeof w[k] === "string";
  switch (w.kind) {
    case "runnable":
      return str("executionId")
        ? { kind: "runnable", executionId: w.executionId as string }
        : undefined;
    case "timer":
      return str("executionId") && typeof w.wakeAtMs === "number"
        ? { kind: "timer", executionId: w.executionId as string, wakeAtMs: w.wakeAtMs }
        : undefined;
    case "notice":
      return str("owner") && str("executionId")
        ? { kind: "notice", owner: w.owner as string, executionId: w.executionId as string }
        : undefined;
    case "message":
      return str("chainId") ? { kind: "message", chainId: w.chainId as string } : undefined;
    case "queue":
      return str("queue") ? { kind: "queue", queue: w.queue as string } : undefined;
    default:
      return undefined;
  }
}

interface Subscriber {
  onWake: (wake: FleetWake) => void;
}

/** The store's listening connection (N3), shared by its subscribers. */
export class WakeListener {
  private readonly subscribers = new Set<Subscriber>();
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private retry: NodeJS.Timeout | undefined;
  private retryMs = RECONNECT_FIRST_MS;
  private closed = false;
  constructor(
    private readonly connectionString: string,
    private readonly channel: string,
  ) {}

  /** Resolves once the connection listens, with the function that unsubscribes. */
  async subscribe(onWake: (wake: FleetWake) => void): Promise<() => Promise<void>> {
    const subscriber: Subscriber = { onWake };
    this.subscribers.add(subscriber);
    try {
      await this.connect();
    } catch (e) {
      this.subscribers.delete(subscriber);
      throw e;
    }
    return async () => {
      if (!this.subscribers.delete(subscriber)) return;
      if (this.subscribers.size === 0) await this.disconnect();
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
    await this.disconnect();
  }

  private connect(): Promise<void> {
    if (this.client) return Promise.resolve();
    this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async open(): Promise<void> {
    const client = new (pgDriver().Client)({
      connectionString: this.connectionString,
      keepAlive: true,
      application_name: "loom-listen",
    });
    client.on("error", () => this.dropped(client));
    client.on("end", () => this.dropped(client));
    client.on("notification", (n) => {
      if (n.channel !== this.channel || n.payload === undefined) return;
      const wake = parseWake(n.payload);
      if (wake) this.deliver(wake);
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
    } catch (e) {
      await client.end().catch(() => {});
      throw e;
    }
    if (this.closed || this.subscribers.size === 0) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.retryMs = RECONNECT_FIRST_MS;
  }

  private deliver(wake: FleetWake): void {
    for (const s of [...this.subscribers]) {
      try {
        s.onWake(wake);
      } catch {
        // A subscriber's failure is its own: the others still hear the wake.
      }
    }
  }

  /** The connection failed or ended: reconnect while anyone listens (N3). */
  private dropped(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.end().catch(() => {});
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.subscribers.size === 0 || this.retry) return;
    const delayMs = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, RECONNECT_MAX_MS);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.connect().catch(() => this.scheduleReconnect());
    }, delayMs);
  }

  private async disconnect(): Promise<void> {
    if (this.retry) clearTimeout(this.retry);
    this.retry = undefined;
    await this.connecting?.catch(() => {});
    // Someone subscribed while the connection was opening: it stays.
    if (!this.closed && this.subscribers.size > 0) return;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
