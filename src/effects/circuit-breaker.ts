/**
 * A circuit breaker per target (K4): after `failures` failures within `windowMs` the circuit
 * opens and refuses effects at once (CircuitOpenError) for `openMs`; then it half-opens and lets
 * one probe through: a success closes it, a failure opens it again.
 *
 * The breaker's state lives in this process (it protects the target from this process), but a
 * refusal is a step failure like any other, recorded in the log, so a re-run is answered from
 * the log and never consults the breaker. Times are read from the runtime clock.
 */
import { defineError, registerErrorClass } from "../kernel/errors.ts";
import type { EffectMiddleware, MiddlewareContext } from "./middleware.ts";

export class CircuitOpenError extends defineError("LOOM_CIRCUIT_OPEN") {}

registerErrorClass(CircuitOpenError.code, CircuitOpenError);

export type CircuitState = "closed" | "open" | "half-open";

export interface CircuitBreakerOptions {
  /** Failures within `windowMs` that open the circuit (default 5). */
  failures?: number;
  windowMs?: number;
  /** How long the circuit stays open before a probe (default 30 s). */
  openMs?: number;
  /** The target of an effect (default: its name). */
  targetOf?: (ctx: MiddlewareContext) => string;
  /** Called on every transition, so it is observable. */
  onTransition?: (target: string, from: CircuitState, to: CircuitState) => void;
}

interface Circuit {
  state: CircuitState;
  failuresAt: number[];
  openedAt: number;
  probing: boolean;
}

export function circuitBreaker(options: CircuitBreakerOptions = {}): EffectMiddleware {
  const threshold = options.failures ?? 5;
  const windowMs = options.windowMs ?? 60_000;
  const openMs = options.openMs ?? 30_000;
  const circuits = new Map<string, Circuit>();
  const move = (target: string, c: Circuit, to: CircuitState) => {
    const from = c.state;
    c.state = to;
    options.onTransition?.(target, from, to);
  };

  return async (ctx, next) => {
    const target = options.targetOf?.(ctx) ?? ctx.effect;
    let c = circuits.get(target);
    if (!c) {
      c = { state: "closed", failuresAt: [], openedAt: 0, probing: false };
      circuits.set(target, c);
    }
    const now = ctx.now();
    if (c.state === "open" && now - c.openedAt >= openMs) move(target, c, "half-open");
    if (c.state === "open" || (c.state === "half-open" && c.probing)) {
      throw new CircuitOpenError(`the circuit for "${target}" is ${c.state}: effect refused`, {
        target,
      });
    }
    const probe = c.state === "half-open";
    if (probe) c.probing = true;
    try {
      const out = await next();
      if (probe) {
        c.probing = false;
        c.failuresAt = [];
        move(target, c, "closed");
      }
      return out;
    } catch (e) {
      const at = ctx.now();
      if (probe) {
        c.probing = false;
        c.openedAt = at;
        move(target, c, "open");
      } else if (c.state === "closed") {
        c.failuresAt = [...c.failuresAt.filter((t) => at - t < windowMs), at];
        if (c.failuresAt.length >= threshold) {
          c.openedAt = at;
          move(target, c, "open");
        }
      }
      throw e;
    }
  };
}
