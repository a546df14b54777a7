/**
 * An execution's calls as bars over time, for a timeline chart (issue 11): each step a bar from
 * its first start to its settlement, each wait (a sleep, a suspend, a receive, an awaitChild) a
 * bar of its own kind, and markers where the log records a cancel or a refused quota. A pure
 * projection of a log (no Node, no clock): times are milliseconds since sequence 0.
 *
 * Invariants (tests cite V1..V5):
 * V1. What a bar says is what the fold says: the log is folded event by event, a bar opens when
 *     its call's frame appears and ends at the event after which the frame is no longer open
 *     (`started` or `waiting`), with the frame's status then.
 * V2. A bar still open when the execution ends (a suspend at a cancel, say) ends at the terminal
 *     event with status `ended`; a bar open in a live execution has `endMs: null`.
 * V3. Markers are EXECUTION_CANCELLED (kernel-stamped only, as the fold reads it), STEP_CANCELLED
 *     and QUOTA_EXCEEDED, each at its event's time, with the timeline's words for it.
 * V4. A log with a gap (compaction) is folded up to the gap (`partial: true`); then the frames
 *     of `state` (loaded as snapshot plus tail) that the walk did not see are added as bars marked
 *     `compacted`, whose end is not known (`endMs` is their start, or null while they are open).
 *     A call the state keeps by its value alone (schema 1.13.0, fold/settled.ts L4) has no start
 *     there: its compacted bar starts at 0.
 * V5. Never throws on a malformed log: what the fold ignores, this ignores.
 */
import { isTerminalEvent, isTerminalStatus, type Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { fold } from "../fold/fold.ts";
import { callFrame, callsOf } from "../fold/settled.ts";
import { initialState, type ExecutionState, type Frame, type FrameStatus } from "../fold/state.ts";
import { timeline } from "./timeline.ts";

export type BarKind = "step" | "sleep" | "suspend" | "receive" | "child";

export interface Bar {
  callId: string;
  name: string;
  scope: string;
  kind: BarKind;
  /** Since sequence 0: the call's first start (a step's recorded `startedAt`). */
  startMs: number;
  /** Since sequence 0: when it settled; null while it runs or waits (V2). */
  endMs: number | null;
  /** The frame's status when the bar ended (or now), or `ended` (V2). */
  status: FrameStatus | "ended";
  attempts: number;
  /** A sleep's wake time, or a suspend's or receive's timeout, since sequence 0. */
  wakeMs?: number;
  /** The child an awaitChild waits for. */
  childId?: string;
  /** Known from the loaded state only: its events were compacted away (V4). */
  compacted?: true;
}

export type MarkerKind = "EXECUTION_CANCELLED" | "STEP_CANCELLED" | "QUOTA_EXCEEDED";

export interface Marker {
  kind: MarkerKind;
  seq: number;
  /** Since sequence 0. */
  atMs: number;
  callId?: string;
  text: string;
}

export interface BarsView {
  /** The time of sequence 0 (runtime clock, epoch ms); 0 for an empty log. */
  t0Ms: number;
  /** The time of the last event, since sequence 0. */
  lastMs: number;
  bars: Bar[];
  markers: Marker[];
  /** The log has a gap: bars after it come from `state` only (V4). */
  partial: boolean;
}

const BAR_KINDS: ReadonlySet<string> = new Set<BarKind>([
  "step",
  "sleep",
  "suspend",
  "receive",
  "child",
]);

const MARKER_KINDS: ReadonlySet<string> = new Set<MarkerKind>([
  "EXECUTION_CANCELLED",
  "STEP_CANCELLED",
  "QUOTA_EXCEEDED",
]);

const isOpen = (f: Frame | undefined): boolean =>
  f !== undefined && (f.status === "started" || f.status === "waiting");

/** The bars and markers of `events` (a whole log, in order), and of `state`'s unseen frames. */
export function executionBars(log: readonly Envelope[], state?: ExecutionState): BarsView {
  const events = log.filter(
    (e) => isPlainObject(e as unknown) && typeof e.at === "number" && Number.isFinite(e.at),
  );
  const t0Ms = events[0]?.at ?? 0;
  const view: BarsView = { t0Ms, lastMs: 0, bars: [], markers: [], partial: false };
  const texts = new Map(timeline(events).map((r) => [r.seq, r.text]));
  const folded = initialState(events[0]?.executionId ?? "");
  const seen = new Map<string, Bar>();
  const open = new Map<string, Bar>();
  for (const e of events) {
    const atMs = e.at - t0Ms;
    view.lastMs = Math.max(view.lastMs, atMs);
    const before = folded.seq;
    fold(folded, e);
    if (folded.seq === before) {
      if (typeof e.seq === "number" && e.seq > before + 1) view.partial = true;
      continue;
    }
    const p = isPlainObject(e.payload) ? e.payload : {};
    const callId = typeof p.callId === "string" ? p.callId : undefined;
    if (callId !== undefined && !seen.has(callId)) {
      const frame = callFrame(folded, callId);
      if (frame && BAR_KINDS.has(frame.kind)) {
        // A call kept by its value alone has no start or wake time in the fold: this event,
        // its first, has what the fold would have read (a suspend answered at once).
        const bar = barOf(
          callId,
          frame.firstStartedAt === undefined ? withWake(frame, p.wakeAtMs) : frame,
          t0Ms,
          typeof p.startedAt === "number" ? p.startedAt : e.at,
        );
        seen.set(callId, bar);
        view.bars.push(bar);
        if (isOpen(frame)) open.set(callId, bar);
        else bar.endMs = atMs;
      }
    }
    for (const [id, bar] of open) {
      const frame = callFrame(folded, id);
      if (frame) bar.attempts = frame.attempts;
      if (isOpen(frame)) continue;
      bar.endMs = atMs;
      bar.status = frame?.status ?? "ended";
      open.delete(id);
    }
    if (isTerminalStatus(folded.status)) {
      for (const bar of open.values()) {
        bar.endMs = atMs;
        bar.status = "ended";
      }
      open.clear();
    }
    const marker = markerOf(e, atMs, callId, texts.get(e.seq) ?? e.kind);
    if (marker) view.markers.push(marker);
  }
  if (state && view.partial) addUnseen(view, seen, state);
  return view;
}

function barOf(callId: string, frame: Frame, t0Ms: number, firstEventAtMs = t0Ms): Bar {
  const bar: Bar = {
    callId,
    name: frame.name,
    scope: frame.scope,
    kind: frame.kind as BarKind,
    startMs: (frame.firstStartedAt ?? firstEventAtMs) - t0Ms,
    endMs: null,
    status: frame.status,
    attempts: frame.attempts,
  };
  if (frame.wakeAtMs !== undefined) bar.wakeMs = frame.wakeAtMs - t0Ms;
  if (frame.childId !== undefined) bar.childId = frame.childId;
  return bar;
}

/** A kept call's frame with the wake time its first event records, as the fold reads it. */
function withWake(frame: Frame, wakeAtMs: unknown): Frame {
  if (typeof wakeAtMs !== "number" || !Number.isFinite(wakeAtMs)) return frame;
  return { ...frame, wakeAtMs };
}

function markerOf(
  e: Envelope,
  atMs: number,
  callId: string | undefined,
  text: string,
): Marker | undefined {
  if (!MARKER_KINDS.has(e.kind)) return undefined;
  if (e.kind === "EXECUTION_CANCELLED" && !isTerminalEvent(e)) return undefined;
  const marker: Marker = { kind: e.kind as MarkerKind, seq: e.seq, atMs, text };
  if (callId !== undefined) marker.callId = callId;
  return marker;
}

/** V4: the frames of a loaded state that the walk over a gapped log did not see. */
function addUnseen(view: BarsView, seen: ReadonlyMap<string, Bar>, state: ExecutionState): void {
  const ended = isTerminalStatus(state.status);
  const count = view.bars.length;
  for (const [callId, frame] of callsOf(state)) {
    if (seen.has(callId) || !BAR_KINDS.has(frame.kind)) continue;
    const bar = barOf(callId, frame, view.t0Ms);
    bar.compacted = true;
    bar.endMs = isOpen(frame) && !ended ? null : bar.startMs;
    if (isOpen(frame) && ended) bar.status = "ended";
    view.bars.push(bar);
  }
  if (view.bars.length > count) view.bars.sort((a, b) => a.startMs - b.startMs);
}
