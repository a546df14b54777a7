/**
 * The memory store: every SPI on Maps, for tests, simulation and benchmarks.
 *
 * Stored events and snapshots are copies (JSON text for snapshots), so a caller that mutates what
 * it passed in or read back cannot change the log. `reopen()` gives a new store over the same
 * data, as a process restart would see it, or, with the first still open, as another process
 * sharing the store would.
 *
 * Key material (S19) lives beside the logs in the same data, so a reopen keeps it; `listKeys`
 * orders ids by their UTF-8 bytes, as the SQL stores do (../key-range.ts K1).
 *
 * `memoryStore({ fleet: true })` is also a `FleetStore` (claims S17, wakes S18, among the handles
 * over its data: fleet.ts); without it the store is not one (`isFleetStore` is false), so a runtime
 * on it recovers by listing, as on SQLite.
 */
import { isWakeId } from "../../fold/index-changes.ts";
import type { Envelope, EnvelopeMeta, EventKind } from "../../kernel/events.ts";
import { copyJson, jsonText, type Json } from "../../kernel/json.ts";
import {
  CompactionWithoutSnapshotError,
  ensureError,
  LoomError,
  InvariantViolation,
} from "../../kernel/errors.ts";
import type { Snapshot } from "../../fold/state.ts";
import { checkBatch, effectiveFence, leaseAvailable } from "../append-check.ts";
import { compareKeyIds } from "../key-range.ts";
import type {
  AcquireOptions,
  AppendBatch,
  AppendOutcome,
  DueTimer,
  ExecutionSummary,
  FleetStore,
  FleetWake,
  InboxMessage,
  Lease,
  ListQuery,
  Notice,
  Schedule,
  Store,
  StoreHooks,
} from "../spi.ts";
import {
  batchWakes,
  claimRunnable,
  releaseWakes,
  send,
  subscribe,
  type Subscribers,
} from "./fleet.ts";

interface Data {
  events: Map<string, StoredEvent[]>;
  executions: Map<string, ExecutionSummary>;
  snapshots: Map<string, { seq: number; stateJson: string }>;
  leases: Map<string, Lease>;
  timers: Map<string, DueTimer>;
  notices: (Notice & { owner: string })[];
  schedules: Map<string, Schedule>;
  inbox: Map<string, InboxMessage[]>;
  /** Key material by id (S19): part of the data, so `reopen()` keeps it (S5). */
  keys: Map<string, string>;
  /** The wake subscriptions of every handle over the data (a fleet store's only). */
  subscribers: Subscribers;
}

export interface MemoryStore extends Store {
  /** A new store over the same data: what a restarted process, or another one, would see. */
  reopen(): MemoryStore;
}

/** A memory store that is a fleet's shared store: its handles claim work and wake each other. */
export interface MemoryFleetStore extends MemoryStore, FleetStore {
  reopen(): MemoryFleetStore;
}

/** The store's test hooks (`StoreHooks`), and whether it is a fleet's store. */
export interface MemoryStoreOptions extends StoreHooks {
  /**
   * Also implement `FleetStore` (S17, S18) among the handles over this data (`reopen()`), as
   * PostgreSQL does among processes. Off by default: the store is then no `FleetStore`.
   */
  fleet?: boolean;
}

/**
 * A new, empty memory store.
 *
 * @example
 * const store = memoryStore(); // one process's store
 * const shared = memoryStore({ fleet: true }); // a fleet's: `shared.reopen()` is another member's
 */
export function memoryStore(options: MemoryStoreOptions & { fleet: true }): MemoryFleetStore;
export function memoryStore(options?: MemoryStoreOptions): MemoryStore;
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const data: Data = {
    events: new Map(),
    executions: new Map(),
    snapshots: new Map(),
    leases: new Map(),
    timers: new Map(),
    notices: [],
    schedules: new Map(),
    inbox: new Map(),
    keys: new Map(),
    subscribers: new Set(),
  };
  return options.fleet === true ? openFleet(data, options) : open(data, options, handle());
}

/** One handle over a store's data: closed or not, and, a fleet member's, its subscriptions. */
interface Handle {
  closed: boolean;
  /** A fleet member's subscriptions, which its close ends (fleet.ts F3); undefined otherwise. */
  own?: Subscribers;
}

const handle = (own?: Subscribers): Handle => (own ? { closed: false, own } : { closed: false });

const assertOpen = (h: Handle) => {
  if (h.closed) throw new InvariantViolation("memory store used after close");
};

const timerKey = (id: string, timerId: string) => `${id}\u0000${timerId}`;

/** Keeps a timer row's value from before the batch (once), for the batch's undo. */
function remember(
  saved: Map<string, DueTimer | undefined>,
  timers: Map<string, DueTimer>,
  key: string,
): void {
  if (!saved.has(key)) saved.set(key, timers.get(key));
}

const NOTICE_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * A stored event: the envelope's fields, a copy of its (flat) meta, and its payload as JSON text,
 * which the runtime already made once (`jsonText`). The text is parsed on the first read only
 * (most events are appended and never read back while the process lives); every read gets a
 * copy of that parse.
 */
class StoredEvent implements Envelope {
  readonly executionId: string;
  readonly seq: number;
  readonly kind: EventKind;
  readonly at: number;
  readonly meta: EnvelopeMeta | undefined;
  #text: string | undefined;
  #parsed: Json = null;

  constructor(e: Envelope) {
    this.executionId = e.executionId;
    this.seq = e.seq;
    this.kind = e.kind;
    this.at = e.at;
    this.meta = e.meta === undefined ? undefined : { ...e.meta };
    this.#text = jsonText(e.payload);
  }

  /** A copy of the payload. */
  get payload(): Json {
    if (this.#text !== undefined) {
      this.#parsed = JSON.parse(this.#text) as Json;
      this.#text = undefined;
    }
    return copyJson(this.#parsed);
  }

  /** What a read returns: a copy, shaped as the SQLite store's envelopes. */
  copy(): Envelope {
    const out: Envelope = {
      executionId: this.executionId,
      seq: this.seq,
      kind: this.kind,
      at: this.at,
      payload: this.payload,
    };
    if (this.meta !== undefined) out.meta = { ...this.meta };
    return out;
  }
}

const copyEvent = (e: StoredEvent): Envelope => e.copy();

/** The last sequence number of `log` (compaction leaves gaps below it, S14), or -1. */
const lastSeq = (log: readonly Envelope[] | undefined) => log?.[log.length - 1]?.seq ?? -1;

/** The index of the first event of `log` with `seq >= from` (the log is ordered by seq). */
function firstAtOrAfter(log: readonly Envelope[], from: number): number {
  // A log never compacted is dense: the index is the sequence number.
  if (log[from]?.seq === from) return from;
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((log[mid] as Envelope).seq < from) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A handle that is also a fleet member's store (fleet.ts). */
function openFleet(data: Data, hooks: StoreHooks): MemoryFleetStore {
  const own: Subscribers = new Set();
  const h = handle(own);
  return {
    ...open(data, hooks, h),
    async claimRunnable(owner, opts) {
      assertOpen(h);
      return claimRunnable(data.executions, data.leases, owner, opts);
    },
    async listen(onWake) {
      assertOpen(h);
      return subscribe(data.subscribers, own, onWake);
    },
    reopen: () => openFleet(data, hooks),
  };
}

function open(data: Data, hooks: StoreHooks, h: Handle): MemoryStore {
  const live = () => assertOpen(h);
  /** Sends wakes (S18) when this handle is a fleet member's; a plain store tells no one. */
  const wake = (wakes: () => FleetWake[]) => {
    if (h.own) send(data.subscribers, wakes());
  };

  function applyBatch(b: AppendBatch, undo: (() => void)[]): void {
    const log = data.events.get(b.executionId);
    const lease = data.leases.get(b.executionId);
    checkBatch(
      b,
      lastSeq(log),
      effectiveFence(b, lease?.fence),
      data.executions.get(b.executionId)?.status,
    );
    applyLease(b, lease, undo);
    applySnapshot(b, undo);
    applyNotice(b, undo);
    const events = log ?? [];
    if (!log) {
      data.events.set(b.executionId, events);
      undo.push(() => data.events.delete(b.executionId));
    }
    const before = events.length;
    undo.push(() => (events.length = before));
    for (const e of b.events) events.push(new StoredEvent(e));
    const prev = data.executions.get(b.executionId);
    const last = b.events[b.events.length - 1] as Envelope;
    data.executions.set(b.executionId, {
      executionId: b.executionId,
      flow: prev?.flow ?? b.flow ?? "",
      status: b.status,
      head: last.seq,
      createdAtMs: prev?.createdAtMs ?? (b.events[0] as Envelope).at,
      updatedAtMs: last.at,
    });
    undo.push(() =>
      prev ? data.executions.set(b.executionId, prev) : data.executions.delete(b.executionId),
    );
    const ix = b.index;
    // A wait with no wake time (a plain suspend) touches no timer row: nothing to save or undo.
    const none =
      !ix ||
      (!ix.clearAllTimers &&
        ix.timersCleared.length + ix.timersSet.length + (ix.wakes?.length ?? 0) === 0);
    if (none) return;
    const saved = new Map<string, DueTimer | undefined>();
    if (ix.clearAllTimers) {
      for (const [key, t] of data.timers) {
        // Never the wake rows others wrote for it (S15).
        if (t.executionId === b.executionId && !isWakeId(t.timerId)) {
          remember(saved, data.timers, key);
          data.timers.delete(key);
        }
      }
    }
    for (const id of ix.timersCleared) {
      remember(saved, data.timers, timerKey(b.executionId, id));
      data.timers.delete(timerKey(b.executionId, id));
    }
    if (!ix.clearAllTimers) {
      for (const t of ix.timersSet) {
        const key = timerKey(b.executionId, t.timerId);
        remember(saved, data.timers, key);
        data.timers.set(key, { executionId: b.executionId, ...t });
      }
    }
    // S15: other executions' wake rows, in this batch's transaction.
    for (const w of ix.wakes ?? []) {
      const key = timerKey(w.executionId, w.timerId);
      remember(saved, data.timers, key);
      data.timers.set(key, {
        executionId: w.executionId,
        timerId: w.timerId,
        wakeAtMs: w.wakeAtMs,
      });
    }
    undo.push(() => {
      for (const [key, t] of saved) {
        if (t) data.timers.set(key, t);
        else data.timers.delete(key);
      }
    });
  }

  function applyLease(b: AppendBatch, lease: Lease | undefined, undo: (() => void)[]): void {
    const id = b.executionId;
    if (!lease && b.claimLease) {
      const { owner, expiresAtMs } = b.claimLease;
      data.leases.set(id, { executionId: id, owner, fence: b.fence, expiresAtMs });
      undo.push(() => data.leases.delete(id));
    }
    const held = data.leases.get(id);
    if (
      held &&
      b.releaseLease !== undefined &&
      held.owner === b.releaseLease &&
      held.fence === b.fence
    ) {
      const owner = held.owner;
      held.owner = undefined;
      undo.push(() => (held.owner = owner));
    }
  }

  function applyNotice(b: AppendBatch, undo: (() => void)[]): void {
    if (!b.notice) return;
    const atMs = b.events[b.events.length - 1]?.at ?? 0;
    const before = data.notices;
    // A notice to an owner that never takes it (it died) is dropped after a day, as in SQLite.
    data.notices = [
      ...before.filter((n) => n.atMs >= atMs - NOTICE_TTL_MS),
      { ...b.notice, executionId: b.executionId, atMs },
    ];
    undo.push(() => (data.notices = before));
  }

  function applySnapshot(b: AppendBatch, undo: (() => void)[]): void {
    const snap = b.snapshot;
    const prev = data.snapshots.get(b.executionId);
    if (!snap || (prev && prev.seq > snap.seq)) return;
    data.snapshots.set(b.executionId, { seq: snap.seq, stateJson: snap.stateJson });
    undo.push(() =>
      prev ? data.snapshots.set(b.executionId, prev) : data.snapshots.delete(b.executionId),
    );
  }

  const store: MemoryStore = {
    kind: "memory",

    async appendMany(batches) {
      live();
      const outcomes: AppendOutcome[] = [];
      const undo: (() => void)[] = [];
      /** What the appended batches wake (S18), each judged right after it applied. */
      const wakes: FleetWake[] = [];
      try {
        for (const b of batches) {
          const mark = undo.length;
          try {
            applyBatch(b, undo);
            outcomes.push({ ok: true });
            if (h.own) wakes.push(...batchWakes(b, data.leases.get(b.executionId)?.owner));
          } catch (e) {
            if (!(e instanceof LoomError)) throw e;
            for (const u of undo.splice(mark).reverse()) u();
            outcomes.push({ ok: false, error: e });
          }
        }
        hooks.beforeCommit?.(batches);
      } catch (e) {
        for (const u of undo.reverse()) u();
        throw ensureError(e);
      }
      wake(() => wakes);
      return outcomes;
    },

    async read(id, fromSeq = 0, limit?: number) {
      live();
      const log = data.events.get(id) ?? [];
      const from = firstAtOrAfter(log, Math.max(0, fromSeq));
      const to = limit === undefined ? undefined : from + Math.max(0, limit);
      return log.slice(from, to).map(copyEvent);
    },

    async head(id) {
      live();
      return lastSeq(data.events.get(id));
    },

    async deleteExecution(id) {
      live();
      const existed = data.events.has(id);
      data.events.delete(id);
      data.executions.delete(id);
      data.snapshots.delete(id);
      data.leases.delete(id);
      for (const [key, t] of data.timers) if (t.executionId === id) data.timers.delete(key);
      return existed;
    },

    async compact(id, throughSeq, keepKinds: readonly EventKind[]) {
      live();
      const snap = data.snapshots.get(id);
      if (snap === undefined || snap.seq < throughSeq) {
        throw new CompactionWithoutSnapshotError(
          `execution "${id}" has no snapshot at or past sequence ${throughSeq}: nothing compacted`,
          { executionId: id, throughSeq, snapshotSeq: snap?.seq ?? null },
        );
      }
      const log = data.events.get(id);
      if (!log) return 0;
      const last = lastSeq(log);
      const keep = new Set<string>(keepKinds);
      const kept = log.filter((e) => e.seq > throughSeq || e.seq === last || keep.has(e.kind));
      const removed = log.length - kept.length;
      data.events.set(id, kept);
      return removed;
    },

    async list(query: ListQuery = {}) {
      live();
      const out: ExecutionSummary[] = [];
      const ids = [...data.executions.keys()].sort();
      // Checked before a row is added, so limit 0 gives none (as SQL's LIMIT does).
      const max = query.limit === undefined ? Infinity : Math.max(0, Math.floor(query.limit));
      for (const id of ids) {
        if (out.length >= max) break;
        const x = data.executions.get(id) as ExecutionSummary;
        if (query.afterId !== undefined && id <= query.afterId) continue;
        if (query.status && !query.status.includes(x.status)) continue;
        if (query.flow !== undefined && x.flow !== query.flow) continue;
        out.push({ ...x });
      }
      return out;
    },

    async saveSnapshot(id, snapshot) {
      live();
      const prev = data.snapshots.get(id);
      if (prev !== undefined && prev.seq > snapshot.seq) return;
      data.snapshots.set(id, { seq: snapshot.seq, stateJson: JSON.stringify(snapshot.state) });
    },

    async loadSnapshot(id) {
      live();
      const snap = data.snapshots.get(id);
      if (snap === undefined) return undefined;
      return { seq: snap.seq, state: JSON.parse(snap.stateJson) as Snapshot["state"] };
    },

    async acquireLease(id, owner, opts: AcquireOptions) {
      live();
      const current = data.leases.get(id);
      if (!leaseAvailable(current, owner, opts)) return undefined;
      const lease: Lease = {
        executionId: id,
        owner,
        fence: (current?.fence ?? 0) + 1,
        expiresAtMs: opts.nowMs + opts.ttlMs,
      };
      data.leases.set(id, lease);
      return { ...lease };
    },

    async renewLease(id, owner, fence, opts) {
      live();
      const current = data.leases.get(id);
      if (!current || current.owner !== owner || current.fence !== fence) return false;
      current.expiresAtMs = opts.nowMs + opts.ttlMs;
      return true;
    },

    async releaseLease(id, owner, fence) {
      live();
      const current = data.leases.get(id);
      if (current && current.owner === owner && current.fence === fence) {
        current.owner = undefined;
        wake(() => releaseWakes(id, data.executions.get(id)?.status));
      }
    },

    async getLease(id) {
      live();
      const current = data.leases.get(id);
      return current ? { ...current } : undefined;
    },

    async dueTimers(nowMs, limit) {
      live();
      return [...data.timers.values()]
        .filter((t) => t.wakeAtMs <= nowMs)
        .sort((a, b) => a.wakeAtMs - b.wakeAtMs)
        .slice(0, limit)
        .map((t) => ({ ...t }));
    },

    async nextWakeAt() {
      live();
      let min: number | undefined;
      for (const t of data.timers.values())
        if (min === undefined || t.wakeAtMs < min) min = t.wakeAtMs;
      return min;
    },

    async deleteTimer(id, timerId) {
      live();
      data.timers.delete(timerKey(id, timerId));
    },

    async deferTimer(id, timerId, wakeAtMs) {
      live();
      const row = data.timers.get(timerKey(id, timerId));
      if (!row) return;
      row.wakeAtMs = wakeAtMs;
      wake(() => [{ kind: "timer", executionId: id, wakeAtMs }]);
    },

    async putSchedule(schedule) {
      live();
      const known = data.schedules.get(schedule.name);
      const copy = structuredClone(schedule);
      data.schedules.set(
        schedule.name,
        known
          ? { ...copy, fromMs: known.fromMs, cursorMs: known.cursorMs }
          : { ...copy, cursorMs: copy.fromMs },
      );
    },

    async listSchedules() {
      live();
      return [...data.schedules.values()]
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .map((s) => structuredClone(s));
    },

    async advanceSchedule(name, cursorMs) {
      live();
      const known = data.schedules.get(name);
      if (known && cursorMs > known.cursorMs) known.cursorMs = cursorMs;
    },

    async deleteSchedule(name) {
      live();
      data.schedules.delete(name);
    },

    async appendMessage(chainId, message) {
      live();
      const stream = data.inbox.get(chainId) ?? [];
      const seq = stream.length;
      stream.push({
        ...message,
        chainId,
        seq,
        payload: JSON.parse(jsonText(message.payload)) as Json,
      });
      data.inbox.set(chainId, stream);
      wake(() => [{ kind: "message", chainId }]);
      return seq;
    },

    async readMessages(chainId, topic, afterSeq, limit) {
      live();
      const stream = data.inbox.get(chainId) ?? [];
      const out: InboxMessage[] = [];
      for (let i = Math.max(0, afterSeq + 1); i < stream.length && out.length < limit; i++) {
        const m = stream[i];
        if (m?.topic === topic)
          out.push({ ...m, payload: JSON.parse(jsonText(m.payload)) as Json });
      }
      return out;
    },

    async putKey(keyId, material) {
      live();
      const stored = data.keys.get(keyId);
      if (stored !== undefined) return stored;
      data.keys.set(keyId, material);
      return material;
    },

    async getKey(keyId) {
      live();
      return data.keys.get(keyId);
    },

    async listKeys(prefix) {
      live();
      return [...data.keys.keys()].filter((id) => id.startsWith(prefix)).sort(compareKeyIds);
    },

    async destroyKey(keyId) {
      live();
      // A JavaScript string cannot be wiped: dropping the last reference is all a heap allows.
      return data.keys.delete(keyId);
    },

    async takeNotices(owner) {
      live();
      if (!data.notices.some((n) => n.owner === owner)) return [];
      const mine = data.notices.filter((n) => n.owner === owner);
      data.notices = data.notices.filter((n) => n.owner !== owner);
      return mine.map(({ executionId, kind, atMs }) => ({ executionId, kind, atMs }));
    },

    async close() {
      h.closed = true;
      for (const subscriber of h.own ?? []) data.subscribers.delete(subscriber);
      h.own?.clear();
    },

    reopen() {
      return open(data, hooks, handle());
    },
  };
  return store;
}
