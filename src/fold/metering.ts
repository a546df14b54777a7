/**
 * The fold of what an execution spends: RESOURCE_METERED adds a delta to the execution's
 * resources and to each budget scope it names; QUOTA_EXCEEDED records the dimension and budget
 * that ran out. A RESOURCE_METERED marked `estimated: "crashed-attempt"` (schema 1.9.0) charges a
 * step's attempt that started and never settled its reservation, and clears it from the step's
 * frame (fold/steps.ts S3), so it is charged once.
 */
import { isPlainObject } from "../kernel/json.ts";
import { addResources } from "../kernel/resources.ts";
import { frameOf, safeKey, str } from "./frames.ts";
import type { Handlers } from "./handler.ts";

/** How a crashed attempt's charge is marked (fold/steps.ts S3). */
export const CRASHED_ATTEMPT = "crashed-attempt";

export const METERING_HANDLERS: Handlers = {
  RESOURCE_METERED(s, p) {
    if (!isPlainObject(p.delta)) return;
    s._resources = addResources(s._resources ?? {}, p.delta);
    if (p.estimated === CRASHED_ATTEMPT && str(p.callId)) {
      const f = frameOf(s, p.callId);
      if (f?.status === "started") delete f.reserved;
    }
    if (!Array.isArray(p.budgets)) return;
    for (const name of p.budgets) {
      if (!str(name) || !safeKey(name)) continue;
      const scopes = (s._scopeResources ??= {});
      scopes[name] = addResources(Object.hasOwn(scopes, name) ? (scopes[name] ?? {}) : {}, p.delta);
    }
  },
  QUOTA_EXCEEDED(s, p) {
    if (!str(p.dimension)) return;
    s._quotaExceeded = { dimension: p.dimension, budget: str(p.budget) ? p.budget : "execution" };
  },
};
