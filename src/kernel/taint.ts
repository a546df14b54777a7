/**
 * Taint: a mark on a value that came from somewhere untrusted (a tool result, a web page, an
 * inbox message), so an effect that must not act on such content (a shell, a payment) can refuse
 * it. The mark is the value itself, wrapped as plain JSON:
 *
 *     { "$tainted": "tool:search", "value": <the content> }
 *
 * so it is journaled, replayed, carried through `ctx.continueAsNew` and copied by a fork like any
 * other value, with no side table that a rotation or a fork could lose.
 *
 * Invariants (tests cite T1..T6):
 * T1. A wrapper is a plain object with exactly the keys `$tainted` (a non-empty string: the
 *     source) and `value` (JSON); `isTainted` recognises that shape and nothing else.
 * T2. `taint` never nests: tainting a tainted value returns it unchanged (its first source
 *     stays), so a value holds at most one wrapper at its top.
 * T3. `taint` is the only way in, `untaint` the only way out: no Loom code removes a wrapper on
 *     its own. Declassifying is a call someone wrote and can be reviewed.
 * T4. `findTaint` finds a wrapper anywhere inside a value, depth-first in key order, and names
 *     its path (`$.messages[2].text`) and source; it walks at most MAX_DEPTH levels, visits each
 *     object once, and never throws.
 * T5. Taint is pure and deterministic: the same value gives the same wrapper and the same
 *     finding on every run, so a refusal replays as it happened.
 * T6. Taint is value-level, not flow-level: content copied out of `.value` (interpolated into a
 *     string, say) is no longer marked. It is a guard against accidents, not an information-flow
 *     proof.
 */
import { InvalidInputError } from "./errors.ts";
import { MAX_DEPTH, type Json } from "./json.ts";

/**
 * A value from an untrusted source, wrapped (T1). `value` is the content as it came. A type
 * alias, not an interface, so a `Tainted<Json>` is itself `Json` (a carry, a step's input).
 */
export type Tainted<T = Json> = {
  /** Where the content came from: `"tool:search"`, `"inbox"`, `"web"`. */
  $tainted: string;
  value: T;
};

/** Where `findTaint` found a wrapper: its JSON path and its source. */
export interface TaintFinding {
  path: string;
  source: string;
}

/** The longest source a mark takes: it names where content came from, not the content. */
export const MAX_TAINT_SOURCE_LENGTH = 200;

/**
 * Marks `value` as coming from `source` (T2: a value already tainted is returned unchanged).
 * `undefined` becomes `null`, as JSON has no undefined: the wrapper always has its `value` key.
 *
 * @example
 * const page = taint(await fetchPage(url), "web");
 * await ctx.execute(shell, page); // refused, if shell declares refusesTainted: true
 */
export function taint<T>(value: T | Tainted<T>, source: string): Tainted<T> {
  checkedTaintSource(source, "taint source");
  if (isTainted(value)) return value as Tainted<T>;
  return { $tainted: source, value: (value === undefined ? null : value) as T };
}

/** True for a taint wrapper (T1): a plain object of exactly `$tainted` and `value`. */
export function isTainted(v: unknown): v is Tainted<Json> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const o = v as { $tainted?: unknown };
  if (typeof o.$tainted !== "string" || o.$tainted === "") return false;
  const keys = Object.keys(v);
  return keys.length === 2 && Object.hasOwn(v, "$tainted") && Object.hasOwn(v, "value");
}

/**
 * Declassifies: the content of a tainted value, or `v` itself when it is not tainted (T3).
 * Only the wrapper at the top is removed: one nested inside `v` stays, and a guard still finds
 * it. Call it where a person or a check has decided the content is safe to act on.
 */
export function untaint<T>(v: Tainted<T>): T;
export function untaint<T>(v: T): T;
export function untaint(v: unknown): unknown {
  let out = v;
  // taint never nests (T2), but a wrapper written by hand might.
  while (isTainted(out)) out = out.value;
  return out;
}

/**
 * The first taint wrapper anywhere inside `v` (depth-first, arrays in order, objects in key
 * order), with its path and source; undefined when there is none (T4). Reads JSON values:
 * objects other than plain ones and arrays are not looked into, and a value that throws while
 * being read (a Proxy, a getter) ends the search. Never throws.
 */
export function findTaint(v: unknown): TaintFinding | undefined {
  const seen = new Set<object>();
  const walk = (x: unknown, path: string, depth: number): TaintFinding | undefined => {
    if (x === null || typeof x !== "object") return undefined;
    if (isTainted(x)) return { path, source: x.$tainted };
    if (depth >= MAX_DEPTH || seen.has(x)) return undefined;
    seen.add(x);
    if (Array.isArray(x)) {
      for (let i = 0; i < x.length; i++) {
        const found = walk(x[i], `${path}[${i}]`, depth + 1);
        if (found) return found;
      }
      return undefined;
    }
    const proto = Object.getPrototypeOf(x) as unknown;
    if (proto !== Object.prototype && proto !== null) return undefined;
    for (const key of Object.keys(x)) {
      const found = walk((x as Record<string, unknown>)[key], `${path}.${key}`, depth + 1);
      if (found) return found;
    }
    return undefined;
  };
  try {
    return walk(v, "$", 0);
  } catch {
    return undefined;
  }
}

/** A taint source as an option gives it: a string of 1 to MAX_TAINT_SOURCE_LENGTH characters. */
export function checkedTaintSource(value: unknown, what: string): string {
  if (typeof value !== "string" || value === "" || value.length > MAX_TAINT_SOURCE_LENGTH) {
    throw new InvalidInputError(
      `${what} must be a string of 1 to ${MAX_TAINT_SOURCE_LENGTH} characters, got ${typeof value === "string" ? JSON.stringify(value.slice(0, 40)) : String(value)}`,
    );
  }
  return value;
}
