/**
 * An effect the secrets tests run in an isolated child: it answers with the environment the child
 * sees, both `process.env` and the kernel's copy (`/proc/self/environ`). Imported by the child to
 * find it, so it does nothing else when imported.
 */
import { readFileSync } from "node:fs";
import { isolated, step$ } from "../../src/index.ts";

function environ(): { names: string[]; proc: string } {
  let proc = "";
  try {
    proc = readFileSync("/proc/self/environ", "utf8");
  } catch {
    // not Linux: process.env alone tells
  }
  return { names: Object.keys(process.env), proc };
}

/** The child's environment, with one variable the caller passes on purpose. */
export const seenEnv = isolated(
  step$("seen-env", async () => environ()),
  { module: import.meta.url, env: { GIVEN_ON_PURPOSE: "yes" } },
);
