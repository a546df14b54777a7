/**
 * What the lean-generation tests (test/fold-settled.test.ts, test/redteam-lean.test.ts) compare:
 * a log as an earlier schema wrote it, and a call as a replay reads it (fold/settled.ts L2).
 */
import type { Envelope, Frame } from "../../src/index.ts";

/** The same log with its start recording schema 1.12.0, the last that kept every frame. */
export function asLegacy(log: readonly Envelope[]): Envelope[] {
  const copy = JSON.parse(JSON.stringify(log)) as Envelope[];
  const start = copy[0]?.payload as { schemaVersion?: string } | undefined;
  if (start) start.schemaVersion = "1.12.0";
  return copy;
}

/** What a replay reads of a call (L2): its kind, status, value or error, input and child. */
export function replayView(f: Frame | undefined) {
  if (f === undefined) return undefined;
  const { kind, name, scope, status, output, error, input, childId } = f;
  return { kind, name, scope, status, output, error, input, childId };
}
