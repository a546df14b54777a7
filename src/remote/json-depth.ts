/**
 * How deep a value crossing the worker seam may nest. A JSON value nested thousands deep passes
 * every byte limit and then overflows the stack of whatever walks it recursively (`toJson`, the
 * fold, a canonical form): on a worker that is a 500 for a request that was only ever malformed.
 * So both sides refuse it first, with InvalidInputError, by walks that do not recurse.
 *
 * Invariants (tests cite J1..J2):
 * J1. Neither check recurses, so neither can overflow the stack however deep its argument is.
 * J2. Each check runs before anything walks its argument recursively: the value check before
 *     `toJson`, the text check before `JSON.parse`.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import { MAX_DEPTH } from "../kernel/json.ts";

/** How deep arrays and objects may nest in an input or a reason: the log's own bound. */
export const MAX_JSON_DEPTH = MAX_DEPTH;

/**
 * Throws InvalidInputError when `value` nests arrays and objects more than `maxDepth` deep (J1).
 * A cycle nests without end, so it is refused the same way. A container reached again by a path
 * no deeper than before is not walked again, so a value sharing subtrees costs at most
 * `maxDepth` walks of each.
 */
export function assertValueDepth(value: unknown, what: string, maxDepth = MAX_JSON_DEPTH): void {
  const walkedAt = new Map<object, number>();
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 1 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const { value: v, depth } = top;
    if (v === null || typeof v !== "object") continue;
    if ((walkedAt.get(v) ?? 0) >= depth) continue;
    if (depth > maxDepth) throw tooDeep(what, maxDepth);
    walkedAt.set(v, depth);
    for (const item of Array.isArray(v) ? (v as unknown[]) : Object.values(v)) {
      if (item !== null && typeof item === "object") stack.push({ value: item, depth: depth + 1 });
    }
  }
}

/**
 * Throws InvalidInputError when the JSON text nests arrays and objects more than `maxDepth` deep
 * (J1). It only counts brackets outside strings: text that is not JSON is left to `JSON.parse`.
 */
export function assertTextDepth(text: string, what: string, maxDepth: number): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) throw tooDeep(what, maxDepth);
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

function tooDeep(what: string, maxDepth: number): InvalidInputError {
  return new InvalidInputError(`${what} nests arrays and objects more than ${maxDepth} deep`, {
    what,
    maxDepth,
  });
}
