/**
 * Input checks through Standard Schema (issue 19): a flow's `input` and `output`, a carry, a
 * resume payload or a message may be declared with any schema library that implements the
 * Standard Schema interface (zod, valibot, arktype, ...). Loom depends on its types only.
 *
 * V1: a value that fails its schema is refused with InvalidInputError, whose `details.issues`
 *     lists every issue as `{ message, path }` (each path segment a string or number), before
 *     anything is appended.
 * V2: what is recorded is the schema's output (its defaults and coercions applied), so a replay
 *     sees exactly what the first run saw and never validates a different value.
 * V3: pure: validation reads only the value and the schema, so it gives the same answer on every
 *     replay.
 */
import type { StandardSchemaV1 } from "@standard-schema/spec";
import { InvalidInputError } from "./errors.ts";

export type { StandardSchemaV1 };

/** One issue a schema found, in plain JSON. */
export type SchemaIssue = {
  message: string;
  path: (string | number)[];
};

/** Whether `value` looks like a Standard Schema (a checked option, before it is used). */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  const props = (value as { "~standard"?: { version?: unknown; validate?: unknown } } | null)?.[
    "~standard"
  ];
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof props === "object" &&
    props !== null &&
    props.version === 1 &&
    typeof props.validate === "function"
  );
}

/** Refuses `schema` unless it is a Standard Schema, naming `what`. */
export function checkedSchema<S>(schema: S, what: string): S {
  if (!isStandardSchema(schema)) {
    throw new InvalidInputError(
      `${what} must be a Standard Schema (zod, valibot, arktype, ...: an object with "~standard" version 1)`,
    );
  }
  return schema;
}

function segment(key: PropertyKey | StandardSchemaV1.PathSegment): string | number {
  const k = typeof key === "object" && key !== null ? key.key : key;
  return typeof k === "number" ? k : String(k);
}

function issuesOf(issues: ReadonlyArray<StandardSchemaV1.Issue>): SchemaIssue[] {
  return issues.map((i) => ({ message: i.message, path: (i.path ?? []).map(segment) }));
}

/**
 * Validates `value` with `schema` (V1..V3): the schema's output, or InvalidInputError naming
 * `what` and listing the issues.
 */
export async function validated<T>(
  schema: StandardSchemaV1<unknown, T>,
  value: unknown,
  what: string,
): Promise<T> {
  const result = await schema["~standard"].validate(value);
  if (result.issues) {
    const issues = issuesOf(result.issues);
    const list = issues
      .slice(0, 5)
      .map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message))
      .join("; ");
    const more = issues.length > 5 ? ` (and ${issues.length - 5} more)` : "";
    throw new InvalidInputError(`${what} fails its schema: ${list}${more}`, {
      issues,
    });
  }
  return result.value;
}
