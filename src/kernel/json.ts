/**
 * JSON values: validation, normalisation, canonical form and byte size.
 *
 * Everything that enters the log passes `toJson` first, so a value that has no faithful JSON
 * form (a function, a cycle, a BigInt, NaN) is refused before anything is appended, instead of
 * being silently changed by `JSON.stringify`.
 */
import { InvalidInputError, PayloadTooLargeError } from "./errors.ts";
import type { Json } from "./json-value.ts";

export type { Json } from "./json-value.ts";

/** How deep arrays and objects may nest in a value that enters the log: `[[1]]` is 2 deep. */
export const MAX_DEPTH = 256;

/**
 * Returns the JSON form of `value` (what `JSON.parse(JSON.stringify(value))` would give),
 * or throws InvalidInputError naming the path of the first value that has none.
 * `undefined` at the top level stays `undefined`; in an object it drops the key, as JSON does.
 * Arrays and objects nested deeper than MAX_DEPTH are refused too: everything that walks a
 * recorded value (this walk, the fold, a canonical form) recurses, and must not overflow.
 */
export function toJson(value: unknown, what: string): Json | undefined {
  return walk(value, { what, seen: undefined }, ROOT, 0);
}

/**
 * Where a walked value sits: its parent's place and its key or index. The path text is made only
 * for an error: a valid value costs no string per key.
 */
interface Place {
  readonly parent: Place | undefined;
  readonly key: string | number;
}
const ROOT: Place = { parent: undefined, key: "$" };

function pathOf(place: Place): string {
  const keys: (string | number)[] = [];
  for (let p: Place | undefined = place; p; p = p.parent) keys.push(p.key);
  let path = "";
  for (let i = keys.length - 1; i >= 0; i--) {
    const k = keys[i] as string | number;
    path += i === keys.length - 1 ? String(k) : typeof k === "number" ? `[${k}]` : `.${k}`;
  }
  return path;
}

/** One walk's own state: what it names in errors, and the objects on its path (cycles). */
interface Walk {
  readonly what: string;
  seen: Set<object> | undefined;
}

/** A module function, not a closure made per call (tsx names each one it makes, ~1 µs). */
function walk(v: unknown, w: Walk, place: Place, depth: number): Json | undefined {
  if (v === null) return null;
  switch (typeof v) {
    case "string":
    case "boolean":
      return v;
    case "number":
      if (!Number.isFinite(v)) throw invalid(w.what, pathOf(place), `the number ${String(v)}`);
      // JSON has no negative zero: what is live must equal what a store reads back.
      return Object.is(v, -0) ? 0 : v;
    case "undefined":
      return undefined;
    case "bigint":
      throw invalid(w.what, pathOf(place), "a BigInt");
    case "function":
      throw invalid(w.what, pathOf(place), "a function");
    case "symbol":
      throw invalid(w.what, pathOf(place), "a symbol");
    case "object":
      break;
  }
  const obj = v;
  const withToJson = obj as { toJSON?: unknown };
  if (typeof withToJson.toJSON === "function") {
    return walk((withToJson.toJSON as () => unknown).call(obj), w, place, depth);
  }
  if (depth >= MAX_DEPTH) throw invalid(w.what, pathOf(place), `nested deeper than ${MAX_DEPTH}`);
  const seen = (w.seen ??= new Set<object>());
  if (seen.has(obj)) throw invalid(w.what, pathOf(place), "a cycle");
  seen.add(obj);
  try {
    return Array.isArray(obj) ? walkArray(obj, w, place, depth) : walkObject(obj, w, place, depth);
  } finally {
    seen.delete(obj);
  }
}

function walkArray(obj: unknown[], w: Walk, place: Place, depth: number): Json[] {
  // Index by index: a hole is null here, as in the JSON the store keeps (`map` skips holes
  // and keeps them, so the live value and its replay would differ).
  const items: Json[] = [];
  for (let i = 0; i < obj.length; i++) {
    items.push(walk(obj[i], w, { parent: place, key: i }, depth + 1) ?? null);
  }
  return items;
}

function walkObject(obj: object, w: Walk, place: Place, depth: number): Json {
  const proto = Object.getPrototypeOf(obj) as unknown;
  if (proto !== Object.prototype && proto !== null) {
    const ctor = (obj as { constructor?: { name?: string } }).constructor?.name ?? "object";
    throw invalid(
      w.what,
      pathOf(place),
      `a ${ctor} (only plain objects and arrays have a JSON form)`,
    );
  }
  const out: { [key: string]: Json } = {};
  for (const k of Object.keys(obj)) {
    const item = (obj as { [key: string]: unknown })[k];
    const j = walk(item, w, { parent: place, key: k }, depth + 1);
    if (j === undefined) continue;
    setOwn(out, k, j);
  }
  return out;
}

function invalid(what: string, path: string, found: string): InvalidInputError {
  return new InvalidInputError(`${what} is not JSON: ${path} is ${found}`, { what, path });
}

/** UTF-8 byte length of a string, without touching Node's Buffer. */
export function utf8Bytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Bytes of the JSON text of a JSON value (0 for undefined). */
export function jsonBytes(value: Json | undefined): number {
  return value === undefined ? 0 : utf8Bytes(JSON.stringify(value));
}

/** `toJson` plus a size bound; PayloadTooLargeError names the limit and the size. */
export function boundedJson(value: unknown, what: string, maxBytes: number): Json | undefined {
  const json = toJson(value, what);
  if (json === undefined) return json;
  const text = JSON.stringify(json);
  // A UTF-16 unit is at most 3 UTF-8 bytes: count exactly only when the text could be over.
  if (text.length * 3 <= maxBytes) return json;
  const bytes = utf8Bytes(text);
  if (bytes > maxBytes) {
    throw new PayloadTooLargeError(`${what} is ${bytes} bytes, over the limit of ${maxBytes}`, {
      what,
      bytes,
      maxBytes,
    });
  }
  return json;
}

/**
 * JSON text with object keys sorted: equal values give equal text. An own `__proto__` key is data
 * here as in `toJson`, so what sits under it is in the text (issue 22: the audit hashes this).
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) {
      const item = sortKeys((value as Record<string, unknown>)[k]);
      // Assignment to "__proto__" would set the prototype and leave the key out of the text.
      if (k === "__proto__") {
        Object.defineProperty(out, k, { value: item, enumerable: true, writable: true });
      } else out[k] = item;
    }
    return out;
  }
  return value;
}

export function isPlainObject(value: unknown): value is { [key: string]: Json } {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

const texts = new WeakMap<object, string>();

/**
 * `JSON.stringify(value)`, remembered for objects: the runtime measures a payload and the store
 * writes it, and both get the same text from one serialisation. A payload is never changed
 * after it is queued, so the remembered text stays right.
 */
export function jsonText(value: Json | undefined): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null);
  const known = texts.get(value);
  if (known !== undefined) return known;
  const text = JSON.stringify(value);
  texts.set(value, text);
  return text;
}

/**
 * The copy of a JSON value that a body or an effect owns: what the fold holds (and a snapshot
 * serialises) must not change when the flow mutates what it was given. A JSON value has only
 * plain objects, arrays and primitives (no -0: toJson normalises it), so a structural copy is
 * what structuredClone would give, at a fraction of its cost.
 */
/**
 * `out[key] = value`, except that an own "__proto__" key stays data: assignment would set the
 * prototype and drop the key.
 */
function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(out, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else out[key] = value;
}

export function copyJson<T>(value: T): T {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(copyJson) as T;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = copyJson((value as Record<string, unknown>)[key]);
    setOwn(out, key, item);
  }
  return out as T;
}
