/**
 * Key ids in order (S19), shared by the stores so that `listKeys` answers the same on each.
 *
 * K1. Ids are ordered by the bytes of their UTF-8 encoding: SQLite's BINARY collation and
 *     PostgreSQL's "C" on a UTF-8 database compare so, and so does `compareKeyIds` in memory.
 *     UTF-8 byte order is code point order, which is not JavaScript's `<` (UTF-16 code units
 *     put U+10000 before U+FFFF).
 * K2. The ids that start with a prefix are exactly those in `[prefix, prefixEnd(prefix))` (code
 *     point order), so a SQL store reads them as an index range, with no pattern to escape: a
 *     `%` or `_` in a prefix is a character like any other.
 * K3. A lone UTF-16 surrogate cannot be encoded: the drivers store it as U+FFFD, so the bounds are
 *     computed from the prefix with its lone surrogates so replaced (`wellFormedKey`).
 */
import { Buffer } from "node:buffer";

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const MAX_CODE_POINT = 0x10ffff;

/** K3: `text` as it is stored, each lone surrogate as U+FFFD. */
export function wellFormedKey(text: string): string {
  return text.replace(LONE_SURROGATE, "\ufffd");
}

/** K1: negative, zero or positive as `a` sorts before, with or after `b`. */
export function compareKeyIds(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

/**
 * K2: the least string after every string that starts with `prefix` (well-formed, K3), or
 * undefined when there is none (an empty prefix, or one of U+10FFFF only): the prefix with its
 * last code point that can be incremented incremented, and what followed it dropped.
 */
export function prefixEnd(prefix: string): string | undefined {
  const points = Array.from(prefix, (c) => c.codePointAt(0) ?? 0);
  while (points.length > 0) {
    const last = points.pop() ?? MAX_CODE_POINT;
    // Surrogate code points are no characters: the next one after U+D7FF is U+E000.
    const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
    if (next <= MAX_CODE_POINT) return String.fromCodePoint(...points, next);
  }
  return undefined;
}
