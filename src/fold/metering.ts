/**
 * The fold of what an execution spends: RESOURCE_METERED adds a delta to the execution's
 * resources and to each budget scope it names; QUOTA_EXCEEDED records the dimension and budget
 * that ran out.
 */
import { isPlainObject } from "../kernel/json.ts";
import { addResources } from "../kernel/resources.ts";
import { safeKey, str } from "./frames.ts";
import type { Handlers } from "./handler.ts";

export const METERING_HANDLERS: Handlers = {
  RESOURCE_METERED(s, p) {
    if (!isPlainObject(p.delta)) return;
    s._resources = addResources(s._resources ?? {}, p.delta);
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
