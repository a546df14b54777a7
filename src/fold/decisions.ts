/**
 * The fold of DECISION_RECORDED: a decision is recorded once per call, and the first value wins.
 * A negotiated grant (`ctx.negotiateBudget`, schema 1.2.0) also sets the budget's limit in its
 * dimension.
 */
import { isPlainObject, type Json } from "../kernel/json.ts";
import { SCALAR_DIMENSIONS, isDimension } from "../kernel/resources.ts";
import { callHead, record, str } from "./frames.ts";
import type { Handlers } from "./handler.ts";
import type { ExecutionState } from "./state.ts";

/** The decision name of ctx.negotiateBudget (ADR 0032 R2). */
export const NEGOTIATE = "$negotiate";

/** A negotiated grant sets the budget's limit in its dimension (schema 1.2.0). */
function applyGrant(s: ExecutionState, value: Json): void {
  if (!isPlainObject(value) || !str(value.dimension)) return;
  const limit = value.limit;
  if (typeof limit !== "number" || !Number.isFinite(limit) || limit < 0) return;
  const dimension = value.dimension;
  if (!isDimension(dimension)) return;
  const budget = { ...s._budget };
  if (dimension.startsWith("custom.")) {
    budget.custom = { ...budget.custom, [dimension.slice("custom.".length)]: limit };
  } else {
    budget[dimension as "tokens" | (typeof SCALAR_DIMENSIONS)[number]] = limit;
  }
  s._budget = budget;
}

export const DECISION_HANDLERS: Handlers = {
  DECISION_RECORDED(s, p) {
    const head = callHead(p);
    if (!head || Object.hasOwn(s._decisions, head.callId) || p.value === undefined) return;
    s._decisions[head.callId] = p.value;
    record(s, head.scope, `decision:${head.callId}`);
    if (head.name === NEGOTIATE) applyGrant(s, p.value);
  },
};
