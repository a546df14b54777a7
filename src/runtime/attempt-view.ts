/**
 * What one attempt of an effect sees (issue 22 red team): the step's context with its attempt
 * number fixed, so a callback an attempt left behind cannot speak for the attempt after it.
 *
 * N2. A note (effect-call.ts N1) is recorded only for the attempt that is running: one made
 *     through the context of an attempt that has ended (it failed and a retry started) is
 *     refused with InvalidInputError, nothing appended, rather than recorded as the next one's
 *     (where recovery would act on a task the next attempt never started).
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { EffectContext } from "../effects/effect.ts";

export function attemptView(ectx: EffectContext): EffectContext {
  const attempt = ectx.attempt;
  return {
    executionId: ectx.executionId,
    stepId: ectx.stepId,
    attempt,
    idempotencyKey: ectx.idempotencyKey,
    get signal() {
      return ectx.signal;
    },
    get resources() {
      return ectx.resources;
    },
    meter(delta) {
      ectx.meter(delta);
    },
    prices: ectx.prices,
    provisional(soFar) {
      ectx.provisional?.(soFar);
    },
    get notes() {
      return ectx.notes;
    },
    note(fact: { [key: string]: Json }) {
      if (ectx.attempt !== attempt) {
        return Promise.reject(
          new InvalidInputError(
            `attempt ${attempt} of step "${ectx.stepId}" has ended: its note is not recorded (attempt ${ectx.attempt} is running)`,
          ),
        );
      }
      return ectx.note ? ectx.note(fact) : Promise.resolve();
    },
    get annotate() {
      return ectx.annotate;
    },
    publishDelta(text) {
      ectx.publishDelta?.(text);
    },
  };
}
