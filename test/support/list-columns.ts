/**
 * Logs written before the list's columns (spi.ts S24; SQLite migration 8, PostgreSQL migration 6)
 * and what each execution's row must list after the upgrade fills them from its log: the SQLite
 * and PostgreSQL upgrade tests share them.
 */
import type { ExecutionSummary } from "../../src/store/spi.ts";

/** An old event: [seq, kind, at, payload text, meta text]. */
export type OldEvent = [number, string, number, string, string | null];

export const OLD_LOGS: Record<string, OldEvent[]> = {
  // Metered twice, a child's spend settled, one corrupt payload and one with amounts no fold adds.
  "m-1": [
    [0, "EXECUTION_STARTED", 10, '{"flow":"f","principal":"alice"}', null],
    [
      1,
      "RESOURCE_METERED",
      11,
      '{"delta":{"costUsd":0.25,"tokens":{"input":10,"output":5}}}',
      null,
    ],
    [
      2,
      "RESOURCE_METERED",
      12,
      '{"delta":{"costUsd":0.5,"costUnknown":true,"tokens":{"input":1}}}',
      null,
    ],
    [
      3,
      "CHILD_DONE",
      13,
      '{"childId":"c","outcome":{"status":"completed","resources":{"costUsd":1,"tokens":{"output":4}}}}',
      null,
    ],
    [4, "RESOURCE_METERED", 14, "{not json", null],
    [5, "RESOURCE_METERED", 15, '{"delta":{"costUsd":-3,"tokens":{"input":"x"}}}', null],
  ],
  // Sealed with a subject's key: the payloads are sealed strings, the start's identity is clear.
  "m-2": [
    [
      0,
      "EXECUTION_STARTED",
      20,
      '"c2VhbGVk"',
      '{"fence":1,"identity":{"flow":"f","principal":"bob"}}',
    ],
    [1, "RESOURCE_METERED", 21, '"c2VhbGVk"', null],
  ],
  "m-3": [
    [0, "EXECUTION_STARTED", 30, '{"flow":"f"}', null],
    [1, "STEP_COMPLETED", 31, '{"callId":"s#0"}', null],
  ],
  // An empty principal is none (fold/start.ts).
  "m-4": [[0, "EXECUTION_STARTED", 40, '{"flow":"f","principal":""}', null]],
};

/** What each old execution lists after the upgrade (S24's fields). */
export const UPGRADED: Record<string, Partial<ExecutionSummary>> = {
  "m-1": { principal: "alice", costUsd: 1.75, costUnknown: true, tokens: 20 },
  "m-2": { principal: "bob" },
  "m-3": {},
  "m-4": {},
};

/** S24's fields of a listed row, to compare with `UPGRADED`. */
export function spentFields(x: ExecutionSummary): Partial<ExecutionSummary> {
  const out: Partial<ExecutionSummary> = {};
  if (x.principal !== undefined) out.principal = x.principal;
  if (x.costUsd !== undefined) out.costUsd = x.costUsd;
  if (x.costUnknown !== undefined) out.costUnknown = x.costUnknown;
  if (x.tokens !== undefined) out.tokens = x.tokens;
  return out;
}
