/**
 * Rate limiters on PostgreSQL across processes (postgres/limiters.ts PL1): several stores, each
 * with its own pool of connections, as a fleet's processes have, reserve against one limiter at
 * once. Whatever order the server runs them in, the grants in the table never pass a limit in any
 * window (S30: concurrent reservers never together pass a limit), nor `concurrent`. Without PL1's
 * lock this fails (checked once by removing it: two reserves read the same free capacity).
 */
import { afterAll, describe, expect, it } from "vitest";
import pg from "pg";
import { postgresStore, type PostgresStore } from "../src/store/postgres/index.ts";
import { tables } from "../src/store/postgres/db.ts";
import type { LimiterAsk, RateLimit } from "../src/store/spi.ts";
import { mulberry32 } from "./helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { slow } from "./support/slowdown.ts";

const url = pgUrl();
const schema = schemaName("limiters");
const opened: PostgresStore[] = [];

afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
  await dropSchema(url, schema);
});

const T0 = 1_000_000;
const STORES = 4;
const CALLERS = 6;
const ASKS = 8;
const TRIES = 10;
const WINDOW = { windowMs: 40, requests: 3, inputTokens: 20 } satisfies RateLimit;
const SLOTS = { windowMs: 40, concurrent: 2 } satisfies RateLimit;

/** One caller: asks in turn, each asked again with its id until granted, else withdrawn. */
async function caller(
  store: PostgresStore,
  name: string,
  limit: RateLimit,
  clock: () => number,
  random: () => number,
): Promise<void> {
  for (let i = 0; i < ASKS; i++) {
    const id = `${name}-${i}`;
    for (let attempt = 0; attempt < TRIES; attempt++) {
      const nowMs = clock();
      const ask: LimiterAsk = {
        id,
        executionId: name,
        requests: 1,
        inputTokens: 1 + Math.floor(random() * 8),
        outputTokens: 0,
        holdUntilMs: T0 + 1_000_000,
        // Longer than the other callers take to ask (a clock tick each): a place is kept.
        waitUntilMs: nowMs + 500,
      };
      const answer = await store.reserve(limit === WINDOW ? "w" : "c", limit, ask, nowMs);
      if (answer.granted) break;
      if (attempt === TRIES - 1) await store.withdraw(limit === WINDOW ? "w" : "c", id);
    }
  }
}

async function race(limit: RateLimit, seed: number): Promise<void> {
  const stores = await Promise.all(
    Array.from({ length: STORES }, () =>
      postgresStore({ connectionString: url, schema, pool: { max: CALLERS } }),
    ),
  );
  opened.push(...stores);
  // A shared clock that moves a millisecond per ask: grants spread over many windows.
  let now = T0;
  const clock = () => now++;
  const random = mulberry32(seed);
  await Promise.all(
    stores.flatMap((store, s) =>
      Array.from({ length: CALLERS }, (_, c) => caller(store, `s${s}c${c}`, limit, clock, random)),
    ),
  );
}

describe("rate limiters on PostgreSQL: concurrent reservers from many processes (S30, PL1)", () => {
  it(
    "never grant more than a window's requests or tokens, in any window",
    async () => {
      await race(WINDOW, 26);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ at: string; requests: string; input: string }>(
          `SELECT g.at_ms AS at, sum(h.requests) AS requests, sum(h.input_tokens) AS input
           FROM ${tables(schema).limiterGrants} g JOIN ${tables(schema).limiterGrants} h
             ON h.limiter = g.limiter AND h.at_ms > g.at_ms - $2 AND h.at_ms <= g.at_ms
           WHERE g.limiter = $1 GROUP BY g.at_ms`,
          ["w", WINDOW.windowMs],
        );
        // Enough grants that the race was run, not a trickle.
        expect(rows.length).toBeGreaterThan(20);
        const over = rows.filter(
          (r) => Number(r.requests) > WINDOW.requests || Number(r.input) > WINDOW.inputTokens,
        );
        expect(over).toEqual([]);
      } finally {
        await client.end();
      }
    },
    slow(120_000),
  );

  it(
    "never hold more slots than `concurrent`",
    async () => {
      await race(SLOTS, 27);
      const view = await opened[0]?.limiterView("c", T0);
      // Nothing settles and every hold lasts past the race: exactly the two first grants hold.
      expect(view?.inFlight).toBe(2);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ n: string }>(
          `SELECT count(*) AS n FROM ${tables(schema).limiterGrants} WHERE limiter = 'c'`,
        );
        expect(Number(rows[0]?.n)).toBe(2);
      } finally {
        await client.end();
      }
    },
    slow(120_000),
  );
});
