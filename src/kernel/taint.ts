/**
 * Taint: a mark on a value that came from somewhere untrusted (a tool result, a web page, an
 * inbox message), so an effect that must not act on such content (a shell, a payment) can refuse
 * it. The mark is a reserved own key on the value itself, and the kernel's wrapper is plain JSON:
 *
 *     { "$tainted": "tool:search", "value": <the content> }
 *
 * so it is journaled, replayed, carried through `ctx.continueAsNew` and copied by a fork like any
 * other value, with no side table that a rotation or a fork could lose. Logs written before the
 * mark was a key hold this same wrapper, so they replay byte for byte and still read as tainted.
 *
 * Invariants (tests cite T1..T6):
 * T1. The mark is the own key `$tainted` (TAINT_KEY) of a non-array object, whatever else the
 *     object holds: the kernel's wrapper, a spread or merge of one (`{ ...hits, x }` copies the
 *     key with the other own keys), or one written by hand. `isTainted` asks it of the top of a
 *     value. A key, not a wrapper's exact shape, so a spread cannot drop it; its value is the
 *     source, and a mark whose value is not a source (a hand-made `{ $tainted: 7 }`) still marks.
 * T2. Only the kernel writes a mark into untrusted content: `taint` escapes the content first
 *     (every key `$tainted`, `$$tainted`, ... gains one `$`, at any depth), then wraps it. What
 *     it returns holds exactly one mark, at its top, naming the caller's source: content shaped
 *     like a wrapper stays content under it, its label escaped, and a tainted value tainted again
 *     is escaped and wrapped whole (still tainted everywhere, from the new source).
 * T3. `taint` is the only way in, `untaint` the only way out: no Loom code removes a mark on its
 *     own. `untaint` removes the mark at the top (a wrapper gives its content; another marked
 *     object gives a copy without the key) and never unescapes, so an escaped label does not
 *     become a mark again. Declassifying is a call someone wrote and can be reviewed.
 * T4. `findTaint` finds a mark anywhere inside a value, own `__proto__` keys included,
 *     depth-first in key order, and names its path (`$.messages[2].text`) and source; it walks
 *     at most MAX_DEPTH levels, visits each object once, and never throws.
 * T5. Taint is pure and deterministic: the same value gives the same wrapper and the same
 *     finding on every run, so a refusal replays as it happened.
 * T6. Taint is value-level, not flow-level: content copied out of `.value` (interpolated into a
 *     string, spread out of it as `{ ...hits.value }`) is no longer marked. It is a guard against
 *     accidents and forged labels, not an information-flow proof.
 */
import { InvalidInputError } from "./errors.ts";
import { MAX_DEPTH, type Json } from "./json.ts";

/** The reserved key that marks a value as tainted (T1); its value names the source. */
export const TAINT_KEY = "$tainted";

/**
 * A value from an untrusted source, wrapped (T1). `value` is the content as it came, escaped
 * (T2). A type alias, not an interface, so a `Tainted<Json>` is itself `Json` (a carry, a step's
 * input).
 */
export type Tainted<T = Json> = {
  /** Where the content came from: `"tool:search"`, `"inbox"`, `"web"`. */
  $tainted: string;
  value: T;
};

/**
 * Any object that carries the mark at its top (T1): a wrapper, a spread of one, or one written
 * by hand, so its other keys are whatever the spread or the hand put there.
 */
export type TaintMark = { readonly $tainted: Json; readonly [key: string]: Json };

/** Where `findTaint` found a mark: its JSON path and its source. */
export interface TaintFinding {
  path: string;
  source: string;
}

/** The longest source a mark takes: it names where content came from, not the content. */
export const MAX_TAINT_SOURCE_LENGTH = 200;

/** What a finding names as the source of a mark whose value is not one (T1: it still marks). */
export const UNNAMED_TAINT_SOURCE = "(unnamed)";

/**
 * Marks `value` as coming from `source`: escapes what in it looks like a mark, then wraps it
 * (T2). `undefined` becomes `null`, as JSON has no undefined: the wrapper always has `value`.
 *
 * @example
 * const page = taint(await fetchPage(url), "web");
 * await ctx.execute(shell, page); // refused, if shell declares refusesTainted: true
 */
export function taint<T>(value: T, source: string): Tainted<T> {
  checkedTaintSource(source, "taint source");
  const content = escaped(value === undefined ? null : value, 0, new Set());
  return { $tainted: source, value: content as T };
}

/** True when `v` carries the mark at its top (T1): an object with an own `$tainted` key. */
export function isTainted(v: unknown): v is TaintMark {
  return v !== null && typeof v === "object" && !Array.isArray(v) && Object.hasOwn(v, TAINT_KEY);
}

/**
 * Declassifies: `v` without the mark at its top, or `v` itself when it has none (T3). A wrapper
 * gives its content, escaped as it entered; another marked object (a spread of a wrapper) gives
 * a copy without the key. Marks nested deeper stay, and a guard still finds them. Call it where
 * a person or a check has decided the content is safe to act on.
 */
export function untaint<T>(v: Tainted<T>): T;
export function untaint<T>(v: T): T;
export function untaint(v: unknown): unknown {
  let out = v;
  // `taint` never puts a mark right under its own (T2), but a value written by hand might.
  while (isTainted(out)) out = unmarked(out);
  return out;
}

/**
 * The first mark anywhere inside `v` (depth-first, arrays in order, objects in own-key order,
 * `__proto__` included), with its path and source; undefined when there is none (T4). Reads
 * JSON values: objects other than plain ones and arrays are not looked into, and a value that
 * throws while being read (a Proxy, a getter) ends the search. Never throws.
 */
export function findTaint(v: unknown): TaintFinding | undefined {
  return findAllTaint(v, 1)[0];
}

/**
 * Every mark inside `v`, in `findTaint`'s order, at most `max` of them (T4): what a person
 * reading a step's input or output is shown. A mark's own content is not looked into: `taint`
 * escapes it (T2), so a mark is never inside another one that `taint` made.
 */
export function findAllTaint(v: unknown, max = 100): TaintFinding[] {
  const found: TaintFinding[] = [];
  const seen = new Set<object>();
  const walk = (x: unknown, path: string, depth: number): void => {
    if (found.length >= max || x === null || typeof x !== "object") return;
    if (isTainted(x)) {
      found.push({ path, source: sourceOf(x) });
      return;
    }
    if (depth >= MAX_DEPTH || seen.has(x)) return;
    seen.add(x);
    if (Array.isArray(x)) {
      for (let i = 0; i < x.length; i++) walk(x[i], `${path}[${i}]`, depth + 1);
      return;
    }
    if (!isPlain(x)) return;
    for (const key of Object.keys(x)) walk(ownValue(x, key), `${path}.${key}`, depth + 1);
  };
  try {
    walk(v, "$", 0);
  } catch {
    // T4: a value that throws while being read ends the search; what was found stands.
  }
  return found;
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

/** A mark's source as a finding names it: the label, or UNNAMED_TAINT_SOURCE (T1). */
function sourceOf(mark: object): string {
  const label = ownValue(mark, TAINT_KEY);
  return typeof label === "string" && label !== ""
    ? label.slice(0, MAX_TAINT_SOURCE_LENGTH)
    : UNNAMED_TAINT_SOURCE;
}

/** A marked object without its mark (T3): a wrapper's content, or a copy without the key. */
function unmarked(mark: object): unknown {
  const keys = Object.keys(mark);
  if (keys.length === 2 && Object.hasOwn(mark, "value")) return ownValue(mark, "value");
  const out: Record<string, unknown> = {};
  for (const key of keys) if (key !== TAINT_KEY) setOwn(out, key, ownValue(mark, key));
  return out;
}

/** `$tainted`, `$$tainted`, ...: the keys content may not hold as they are (T2). */
const RESERVED_SHAPE = /^\$+tainted$/;

/**
 * `v` with every reserved-shaped key one `$` longer (T2), sharing what needs no change. Follows
 * `toJSON` as `toJson` does (so that is called once); leaves what has no JSON form (a cycle, a
 * class, a value nested deeper than MAX_DEPTH) as it is, for `toJson` to refuse where the
 * value is recorded.
 */
function escaped(v: unknown, depth: number, path: Set<object>): unknown {
  if (v === null || typeof v !== "object") return v;
  const toJSON = (v as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    const json = toJSON.call(v) as unknown;
    return json === v ? v : escaped(json, depth, path);
  }
  if (depth >= MAX_DEPTH || path.has(v)) return v;
  path.add(v);
  try {
    if (Array.isArray(v)) {
      const items = (v as unknown[]).map((item) => escaped(item, depth + 1, path));
      return items.some((item, i) => item !== (v as unknown[])[i]) ? items : v;
    }
    if (!isPlain(v)) return v;
    let changed = false;
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(v)) {
      const item = ownValue(v, key);
      const next = escaped(item, depth + 1, path);
      const name = RESERVED_SHAPE.test(key) ? `$${key}` : key;
      if (next !== item || name !== key) changed = true;
      setOwn(out, name, next);
    }
    return changed ? out : v;
  } finally {
    path.delete(v);
  }
}

function isPlain(x: object): boolean {
  const proto = Object.getPrototypeOf(x) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * The value of `key`, one of `x`'s own keys: reading an own `__proto__` gets the own key, which
 * shadows the accessor (T4); only assigning one would set the prototype.
 */
function ownValue(x: object, key: string): unknown {
  return (x as Record<string, unknown>)[key];
}

/** Sets an own enumerable key, `__proto__` included (assignment would set the prototype). */
function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}
