/**
 * vitest, for the store conformance suite, loaded when the suite is first imported: vitest is an
 * optional peer of `loomwork/testing` (issue 19), so importing the fake servers from the same
 * entry works without it, and a suite run without it fails with MissingDependencyError saying
 * what to install.
 *
 * Each name is a stand-in that forwards to vitest's own on use, so the suite's files read as
 * ordinary vitest tests.
 */
import type * as Vitest from "vitest";
import { importPeer } from "../../peers.ts";

let loaded: typeof Vitest | undefined;
let failure: unknown;
try {
  loaded = await importPeer<typeof Vitest>(
    "vitest",
    "the store conformance suite (loomwork/testing)",
  );
} catch (e) {
  failure = e;
}

function vitest(): typeof Vitest {
  if (loaded === undefined) throw failure;
  return loaded;
}

/** A stand-in for one of vitest's functions: calls and property reads reach the real one. */
function forward<K extends "describe" | "it" | "expect" | "afterEach">(
  name: K,
): (typeof Vitest)[K] {
  const target = (() => undefined) as unknown as (typeof Vitest)[K];
  return new Proxy(target, {
    apply: (_t, self, args: unknown[]) =>
      Reflect.apply(vitest()[name] as (...a: unknown[]) => unknown, self, args),
    get: (_t, key) => Reflect.get(vitest()[name], key) as unknown,
  });
}

export const describe = forward("describe");
export const it = forward("it");
export const expect = forward("expect");
export const afterEach = forward("afterEach");
