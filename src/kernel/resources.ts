/**
 * Resource dimensions (ADR 0032): what an effect costs and what a budget allows.
 *
 * Invariants (tests cite Q1..Q7; Q4 is overBudget's):
 * Q1. An unset dimension stays undefined, never a false zero: a total has a dimension only once
 *     some delta reported it.
 * Q2. Adding deltas is pure and ignores what is not a finite number >= 0, the same way every
 *     time (the fold reads deltas from logs it did not write).
 * Q3. A budget is exceeded in a dimension when the spent total is at or over its limit.
 * Q6. A reservation (what one call may spend at most) is an object of known dimensions whose
 *     every amount is a finite number >= 0, with at least one amount: `reservationProblem` says
 *     what is wrong with anything else, so it is refused rather than read as "nothing reserved".
 * Q5. Narrowing a budget (`narrowBudget`, a fork's own budget) never raises or drops one of its
 *     limits: each dimension takes the smaller limit, and one only the narrower budget limits is
 *     added.
 * Q7. `costUnknown` sticks: a total is marked once any delta added to it was (a call whose cost
 *     could not be priced ran, so its `costUsd` is a lower bound), and nothing unmarks it.
 */

export interface TokenCounts {
  input?: number;
  output?: number;
}

/** The dimensions measured the same way in a cost and in a limit. */
interface Amounts {
  costUsd?: number;
  ms?: number;
  memBytes?: number;
  wallMs?: number;
  netBytes?: number;
  custom?: Record<string, number>;
}

/** What one effect cost. `estimated` marks figures that are estimates (an aborted stream). */
export interface ResourceDelta extends Amounts {
  tokens?: TokenCounts;
  estimated?: true;
  /**
   * The call spent money its `costUsd` does not count: it could not be priced (issue 20: an
   * unpriced model that `unpricedCost: "allow"` let run, or that ran under no cost budget).
   */
  costUnknown?: true;
  /** What priced `costUsd`: the model it was priced as, and where the price came from. */
  priced?: { model: string; source: string };
}

/**
 * What an execution (or a scope) has spent so far; `costUnknown` when some of it could not be
 * priced (Q7).
 */
export type ResourceSnapshot = Omit<ResourceDelta, "estimated" | "priced">;

/** Limits; `tokens` bounds input plus output. */
export interface Budget extends Amounts {
  tokens?: number;
}

export const SCALAR_DIMENSIONS = ["costUsd", "ms", "memBytes", "wallMs", "netBytes"] as const;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

const amount = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined;

/** The sum of `total` and `delta` (Q1, Q2); neither is changed. */
export function addResources(total: ResourceSnapshot, delta: unknown): ResourceSnapshot {
  if (!isRecord(delta)) return total;
  const d = delta;
  const out: ResourceSnapshot = { ...total };
  for (const k of SCALAR_DIMENSIONS) {
    const v = amount(d[k]);
    if (v !== undefined) out[k] = (total[k] ?? 0) + v;
  }
  if (isRecord(d.tokens)) {
    const t = d.tokens;
    const input = amount(t.input);
    const output = amount(t.output);
    if (input !== undefined || output !== undefined) {
      const tokens: TokenCounts = { ...total.tokens };
      if (input !== undefined) tokens.input = (tokens.input ?? 0) + input;
      if (output !== undefined) tokens.output = (tokens.output ?? 0) + output;
      out.tokens = tokens;
    }
  }
  if (isRecord(d.custom)) {
    const custom: Record<string, number> = { ...total.custom };
    let any = false;
    for (const [k, raw] of Object.entries(d.custom)) {
      const v = amount(raw);
      if (v === undefined || k === "__proto__") continue;
      custom[k] = (Object.hasOwn(custom, k) ? (custom[k] ?? 0) : 0) + v;
      any = true;
    }
    if (any) out.custom = custom;
  }
  if (d.costUnknown === true) out.costUnknown = true; // Q7
  return out;
}

/** The first dimension of `budget` that `spent` has used up (Q3), or undefined. */
export function exhausted(spent: ResourceSnapshot, budget: Budget | undefined): string | undefined {
  return firstPast(spent, budget, (used, limit) => used >= limit);
}

/**
 * Admission with reservations (Q4, issue 20): the first dimension of `budget` that a call holding
 * `reservation` may not enter, or undefined. It may not when what is spent plus what other calls
 * in flight hold (`held`) is at the limit already, or would pass it with this call's reservation:
 * so calls running at once never hold more than the budget, and what they really spend is
 * bounded by the budget plus what one call spends past its reservation.
 */
export function overBudget(
  spent: ResourceSnapshot,
  held: ResourceSnapshot,
  reservation: ResourceSnapshot | undefined,
  budget: Budget | undefined,
): string | undefined {
  const committed = addResources(spent, held);
  const full = exhausted(committed, budget);
  if (full !== undefined || reservation === undefined) return full;
  return firstPast(addResources(committed, reservation), budget, (used, limit) => used > limit);
}

function firstPast(
  spent: ResourceSnapshot,
  budget: Budget | undefined,
  past: (used: number, limit: number) => boolean,
): string | undefined {
  if (!budget) return undefined;
  if (budget.tokens !== undefined) {
    const used = (spent.tokens?.input ?? 0) + (spent.tokens?.output ?? 0);
    if (past(used, budget.tokens)) return "tokens";
  }
  for (const k of SCALAR_DIMENSIONS) {
    const limit = budget[k];
    if (limit !== undefined && past(spent[k] ?? 0, limit)) return k;
  }
  for (const [k, limit] of Object.entries(budget.custom ?? {})) {
    if (past(spent.custom?.[k] ?? 0, limit)) return `custom.${k}`;
  }
  return undefined;
}

/** A budget as a caller gave it, checked: every limit a finite number >= 0. */
export function readBudget(value: unknown): Budget | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value)) return undefined;
  const v = value;
  const out: Budget = {};
  for (const k of ["tokens", ...SCALAR_DIMENSIONS] as const) {
    if (v[k] === undefined) continue;
    const n = amount(v[k]);
    if (n === undefined) return undefined;
    out[k] = n;
  }
  if (v.custom !== undefined) {
    if (!isRecord(v.custom)) return undefined;
    const custom: Record<string, number> = {};
    for (const [k, raw] of Object.entries(v.custom)) {
      const n = amount(raw);
      if (n === undefined) return undefined;
      custom[k] = n;
    }
    out.custom = custom;
  }
  return out;
}

/** How much of `dimension` (a scalar, "tokens", or "custom.<name>") `spent` has used. */
export function spentIn(spent: ResourceSnapshot | undefined, dimension: string): number {
  if (!spent) return 0;
  if (dimension === "tokens") return (spent.tokens?.input ?? 0) + (spent.tokens?.output ?? 0);
  if (dimension.startsWith("custom.")) return spent.custom?.[dimension.slice(7)] ?? 0;
  const v = spent[dimension as (typeof SCALAR_DIMENSIONS)[number]];
  return typeof v === "number" ? v : 0;
}

/** The limit of `budget` in `dimension`, or Infinity where it sets none. */
export function limitIn(budget: Budget | undefined, dimension: string): number {
  if (!budget) return Infinity;
  if (dimension.startsWith("custom.")) return budget.custom?.[dimension.slice(7)] ?? Infinity;
  const v = budget[dimension as "tokens" | (typeof SCALAR_DIMENSIONS)[number]];
  return typeof v === "number" ? v : Infinity;
}

/** Whether `dimension` names a budget dimension. */
export function isDimension(dimension: unknown): dimension is string {
  if (typeof dimension !== "string") return false;
  if (dimension.startsWith("custom."))
    return dimension.length > 7 && dimension !== "custom.__proto__";
  return dimension === "tokens" || (SCALAR_DIMENSIONS as readonly string[]).includes(dimension);
}

/** Every limit `budget` sets, by dimension as `limitIn` names it ("tokens", "custom.<name>"). */
export function limitsOf(budget: Budget | undefined): [string, number][] {
  if (!budget) return [];
  const out: [string, number][] = [];
  if (budget.tokens !== undefined) out.push(["tokens", budget.tokens]);
  for (const k of SCALAR_DIMENSIONS) {
    const limit = budget[k];
    if (limit !== undefined) out.push([k, limit]);
  }
  for (const [k, limit] of Object.entries(budget.custom ?? {})) out.push([`custom.${k}`, limit]);
  return out;
}

/** Q5: `budget` narrowed by `to`, whatever `to` holds; neither is changed. */
export function narrowBudget(budget: Budget | undefined, to: Budget): Budget {
  const limits = new Map(limitsOf(budget));
  for (const [dimension, limit] of limitsOf(to)) {
    limits.set(dimension, Math.min(limit, limits.get(dimension) ?? Infinity));
  }
  const out: Budget = {};
  for (const [dimension, limit] of limits) {
    if (!isDimension(dimension)) continue;
    if (dimension.startsWith("custom.")) {
      out.custom = { ...out.custom, [dimension.slice("custom.".length)]: limit };
    } else {
      out[dimension as "tokens" | (typeof SCALAR_DIMENSIONS)[number]] = limit;
    }
  }
  return out;
}

/**
 * The first limit of `budget` that `to` would raise or drop, with what `to` asks there (absent:
 * dropped), or undefined when `to` is as tight or tighter in every dimension `budget` limits.
 */
export function loosenedLimit(
  budget: Budget | undefined,
  to: Budget,
): { dimension: string; limit: number; asked?: number } | undefined {
  const asked = new Map(limitsOf(to));
  for (const [dimension, limit] of limitsOf(budget)) {
    const wanted = asked.get(dimension);
    if (wanted === undefined) return { dimension, limit };
    if (wanted > limit) return { dimension, limit, asked: wanted };
  }
  return undefined;
}

/** Q6: what is wrong with `value` as a reservation, or undefined when it is one. */
export function reservationProblem(value: unknown): string | undefined {
  if (!isRecord(value)) return "it is not an object";
  let amounts = 0;
  const check = (where: string, v: unknown): string | undefined => {
    if (amount(v) === undefined) return `${where} is ${String(v)}, not a finite number >= 0`;
    amounts++;
    return undefined;
  };
  for (const [k, v] of Object.entries(value)) {
    let problem: string | undefined;
    if ((SCALAR_DIMENSIONS as readonly string[]).includes(k)) problem = check(k, v);
    else if (k === "tokens" || k === "custom") {
      if (!isRecord(v)) return `${k} is not an object`;
      for (const [sub, x] of Object.entries(v)) {
        if (k === "tokens" && sub !== "input" && sub !== "output") {
          return `tokens.${sub} is not a token count (input, output)`;
        }
        problem ??= check(`${k}.${sub}`, x);
      }
    } else return `"${k}" is not a dimension (tokens, ${SCALAR_DIMENSIONS.join(", ")}, custom)`;
    if (problem !== undefined) return problem;
  }
  return amounts === 0 ? "it reserves no amount" : undefined;
}
