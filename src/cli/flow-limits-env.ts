/**
 * The deployment's flow-control limits, from the environment, for every command's runtime
 * (open-runtime.ts): `LOOM_QUEUES` (JSON, the runtime's `queues` option: `{"support":
 * {"concurrency": 5, "keyConcurrency": 1}}`) and `LOOM_RATE_LIMITS` (JSON, its `rateLimits`:
 * `{"openai:gpt-4o": {"rpm": 500, "outputTpm": 10000}}`). Like `LOOM_FEATURES`, every process
 * sharing the database must agree (runtime/queues.ts QU4, rate-limits.ts RL6), so they are the
 * deployment's setting, not a command's option: a worker holds them, and `loom ls` and `loom ui`
 * show them and estimate waits by them (runtime/verbs-flow-control.ts FV2).
 *
 * FL1. Unset or empty, a variable gives nothing (the runtime then knows no limits). Set, it must
 *      be a JSON object the runtime accepts; anything else is a UsageError naming the variable,
 *      raised before the store is opened.
 */
import type { QueueLimits } from "../store/spi.ts";
import type { RateLimitOptions } from "../runtime/rate-limits.ts";
import { checkedRateLimits } from "../runtime/rate-limits.ts";
import { checkedQueueLimits } from "../runtime/queue-options.ts";
import { UsageError } from "./cli-error.ts";

export interface FlowLimits {
  queues?: Record<string, QueueLimits>;
  rateLimits?: Record<string, RateLimitOptions>;
}

/** FL1 */
export function flowLimitsFromEnv(env: NodeJS.ProcessEnv): FlowLimits {
  const out: FlowLimits = {};
  const queues = parsed(env, "LOOM_QUEUES");
  if (queues !== undefined) {
    checked("LOOM_QUEUES", () => checkedQueueLimits(queues as Record<string, QueueLimits>));
    out.queues = queues as Record<string, QueueLimits>;
  }
  const rates = parsed(env, "LOOM_RATE_LIMITS");
  if (rates !== undefined) {
    const given = rates as Record<string, RateLimitOptions>;
    checked("LOOM_RATE_LIMITS", () => checkedRateLimits(given));
    out.rateLimits = given;
  }
  return out;
}

function parsed(env: NodeJS.ProcessEnv, name: string): unknown {
  const text = env[name]?.trim();
  if (text === undefined || text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new UsageError(`${name} is not JSON: ${why}`);
  }
}

function checked(name: string, check: () => unknown): void {
  try {
    check();
  } catch (e) {
    throw new UsageError(`${name}: ${e instanceof Error ? e.message : String(e)}`);
  }
}
