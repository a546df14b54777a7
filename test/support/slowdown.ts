/**
 * One factor for every wait in the suite (issue 21 item 10): `LOOM_TEST_SLOWDOWN=3 npm test`
 * gives each timeout, deadline to observe and vitest's own test and hook timeouts three times as
 * long, for a loaded or slow machine. A test asserts what happens and in what order, never how
 * fast (figures belong in bench/), so a larger factor only lets a slow run finish.
 */
function factor(): number {
  const raw = process.env.LOOM_TEST_SLOWDOWN;
  if (raw === undefined || raw === "") return 1;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 1) {
    throw new Error(`LOOM_TEST_SLOWDOWN must be a number >= 1, got ${JSON.stringify(raw)}`);
  }
  return n;
}

export const SLOWDOWN = factor();

/** `ms` scaled by LOOM_TEST_SLOWDOWN: use it for how long a test waits, never for a delay it sets up. */
export const slow = (ms: number): number => Math.round(ms * SLOWDOWN);
