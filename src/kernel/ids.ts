/**
 * Execution ids.
 *
 * An id is 1..200 characters from [A-Za-z0-9._:~#@/+=-], starting with a letter or digit.
 * `__loom_` is reserved for the kernel. `::`, `#`, `~` and `@` are allowed because the kernel
 * builds ids from them: children (`parent::key#0`), chain generations (`chain~1`) and schedule
 * occurrences (`nightly@2026-11-30T08:00:00.000Z`).
 *
 * Invariants (tests cite I1..I3; issue 22 item 7): the shapes the kernel makes are reserved, so
 * that no caller can create one first and make the kernel's own start fail or adopt the caller's.
 * `reservedShape` names them; a caller's start, fork or restore refuses them
 * (runtime-support.ts assertCreatable), and only the kernel's own paths create them.
 * I1. A child's id: a `::` followed, in its last part, by a call id ending `#<n>`
 *     (`p::kid#0`, `p::par#0/kid#3`; kernel/children.ts P1). Made only by ctx.spawn's supervisor.
 * I2. A schedule occurrence's id: anything ending `@<ISO 8601 instant in UTC, with milliseconds>`
 *     (runtime/schedules.ts occurrenceId). Made only by the schedule's firing.
 * I3. A chain successor's id: a last `::` segment `<anything>~<n>`, the empty anything included,
 *     so `edge::~1`, the successor of `edge::`, is one (kernel/chain.ts C2). Made only by
 *     ctx.continueAsNew.
 */
import { InvalidIdError } from "./errors.ts";

export const MAX_ID_LENGTH = 200;
const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:~#@/+=-]*$/;
export const RESERVED_ID_PREFIX = "__loom_";

export function assertValidId(id: unknown): asserts id is string {
  if (typeof id !== "string") {
    throw new InvalidIdError(`execution id must be a string, got ${typeof id}`);
  }
  if (id.length === 0) throw new InvalidIdError("execution id is empty");
  if (id.length > MAX_ID_LENGTH) {
    throw new InvalidIdError(`execution id is ${id.length} characters, over ${MAX_ID_LENGTH}`, {
      length: id.length,
    });
  }
  if (id.startsWith(RESERVED_ID_PREFIX)) {
    throw new InvalidIdError(`execution id ${JSON.stringify(id)} uses the reserved prefix __loom_`);
  }
  if (!ID_PATTERN.test(id)) {
    throw new InvalidIdError(
      `execution id ${JSON.stringify(id)} must start with a letter or digit and use only letters, digits and . _ : ~ # @ / + = -`,
    );
  }
}

/** I1: `::`, then a last part ending in a call id's occurrence `#<n>`. */
const CHILD_SHAPE = /::[^:]*#[0-9]+$/;
/** I2: `@`, then what `Date.prototype.toISOString` writes (six-digit years included). */
const OCCURRENCE_SHAPE =
  /@(?:[0-9]{4}|[+-][0-9]{6})-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/;

/**
 * I1, I2: the kernel-made shape `id` has, if any ("child" or "occurrence"). A chain successor's
 * shape (I3) is kernel/chain.ts `successorShape`'s.
 */
export function reservedShape(id: string): "child" | "occurrence" | undefined {
  if (CHILD_SHAPE.test(id)) return "child";
  if (OCCURRENCE_SHAPE.test(id)) return "occurrence";
  return undefined;
}
