/**
 * The end of an exhaustive switch (events.ts E5): `default: return assertNever(x, "status")`
 * compiles only while every case of `x`'s union is handled above it, so a member added to the
 * union is a compile error at each switch that does not handle it. Reached at run time (a value
 * from outside the types: a corrupt row, a newer writer), it is an InvariantViolation.
 */
import { InvariantViolation } from "./errors.ts";

export function assertNever(value: never, what: string): never {
  throw new InvariantViolation(`unhandled ${what} ${JSON.stringify(value)}`);
}
