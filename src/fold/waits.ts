/**
 * The fold of waits: sleeps (TIMER_SCHEDULED), suspends, receives and waits on a child
 * (SUSPENDED), and what ends them (TIMER_FIRED, RESUMED, and MESSAGE_CONSUMED in inbox.ts).
 *
 * Invariants:
 * - A wait not answered at once is open (counted in `openWaits`, fold.ts F7) until it settles,
 *   once.
 * - A resume answers the oldest open suspend; a resume with none open is queued, and answers the
 *   next suspend at once.
 * - A receive's wait is settled by a MESSAGE_CONSUMED or its timeout, never by a resume.
 */
import { callHead, frameOf, record, settleWait } from "./frames.ts";
import { AWAIT_CHILD, awaitChild } from "./children.ts";
import type { Handlers } from "./handler.ts";
import { RECEIVE, topicOf } from "./inbox.ts";
import { isRecorded, keepValueOnly } from "./settled.ts";
import type { Frame } from "./state.ts";

export const WAIT_HANDLERS: Handlers = {
  TIMER_SCHEDULED(s, p, e) {
    const head = callHead(p);
    const wakeAtMs = p.wakeAtMs;
    if (!head || isRecorded(s, head.callId) || typeof wakeAtMs !== "number") return;
    if (!Number.isFinite(wakeAtMs)) return;
    s.frames[head.callId] = {
      kind: "sleep",
      ...head,
      status: "waiting",
      firstStartedAt: e.at,
      attempts: 1,
      wakeAtMs,
    };
    record(s, head.scope, `sleep:${head.callId}`);
    s.openWaits++;
  },
  TIMER_FIRED(s, p) {
    const f = frameOf(s, p.callId);
    if (!f || f.status !== "waiting") return;
    if (f.kind === "sleep") {
      f.status = "fired";
    } else if (f.kind === "suspend" && f.wakeAtMs !== undefined) {
      f.status = "timedOut";
      s._openSuspends = s._openSuspends.filter((id) => id !== p.callId);
    } else if (f.kind === "receive" && f.wakeAtMs !== undefined) {
      f.status = "timedOut";
    } else return;
    settleWait(s);
  },
  SUSPENDED(s, p, e) {
    const head = callHead(p);
    if (!head || isRecorded(s, head.callId)) return; // settled.ts L3
    if (head.name === AWAIT_CHILD) return awaitChild(s, p, e);
    if (head.name === RECEIVE) {
      // A receive's wait (schema 1.5.0): settled by a MESSAGE_CONSUMED, never by a resume.
      const topic = topicOf(p.topic);
      if (topic === undefined) return;
      const f: Frame = {
        kind: "receive",
        ...head,
        status: "waiting",
        firstStartedAt: e.at,
        attempts: 1,
        topic,
      };
      if (typeof p.wakeAtMs === "number" && Number.isFinite(p.wakeAtMs)) f.wakeAtMs = p.wakeAtMs;
      s.frames[head.callId] = f;
      record(s, head.scope, `receive:${head.callId}`);
      s.openWaits++;
      return;
    }
    const f: Frame = {
      kind: "suspend",
      ...head,
      status: "waiting",
      firstStartedAt: e.at,
      attempts: 1,
    };
    if (typeof p.wakeAtMs === "number" && Number.isFinite(p.wakeAtMs)) f.wakeAtMs = p.wakeAtMs;
    s.frames[head.callId] = f;
    record(s, head.scope, `suspend:${head.callId}`);
    if (s._resumePayloads.length > 0) {
      f.status = "resumed";
      const queued = s._resumePayloads.shift();
      if (queued !== undefined) f.output = queued;
      keepValueOnly(s, head.callId, f); // settled.ts L1
      return;
    }
    s._openSuspends.push(head.callId);
    s.openWaits++;
  },
  RESUMED(s, p) {
    const payload = p.payload === undefined ? null : p.payload;
    const callId = s._openSuspends.shift();
    const f = frameOf(s, callId);
    if (!f) {
      s._resumePayloads.push(payload);
      return;
    }
    f.status = "resumed";
    f.output = payload;
    settleWait(s);
    keepValueOnly(s, callId as string, f); // settled.ts L1 (frameOf found it: a string)
  },
};
