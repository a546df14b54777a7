/**
 * Execution ids.
 *
 * An id is 1..200 characters from [A-Za-z0-9._:~#@/+=-], starting with a letter or digit.
 * `__loom_` is reserved for the kernel. `::`, `#` and `~` are allowed because children
 * (`parent::key#0`) and chain generations (`chain~1`) are built from them.
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
