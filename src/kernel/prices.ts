/**
 * Prices a user supplies for model calls (issue 20): an LLM effect's own `price`, and the
 * runtime's `prices` table by model name, for models the pinned price data does not know.
 *
 * Invariants (tests cite PR1..PR3):
 * PR1. A price is two finite numbers >= 0, per million input and output tokens. Anything else is
 *     refused where it is given (InvalidInputError naming the bad key), never at a call.
 * PR2. A table prices a model by its own keys only: an inherited name (`toString`,
 *     `__proto__`) prices nothing.
 * PR3. A checked table is a frozen copy: what the caller changes later changes no price.
 */
import { InvalidInputError } from "./errors.ts";

/** A price per million tokens. */
export interface ModelPrice {
  inputPerMTok: number;
  outputPerMTok: number;
}

/** Prices by model name (RuntimeOptions.prices). */
export type PriceTable = Readonly<Record<string, Readonly<ModelPrice>>>;

/** The table of a runtime given no `prices`. */
export const NO_PRICES: PriceTable = Object.freeze(Object.create(null) as Record<string, never>);

const isRecord = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/** `value` as a price (PR1), or InvalidInputError naming `what`. */
export function checkedPrice(value: unknown, what: string): ModelPrice {
  if (!isRecord(value)) {
    throw new InvalidInputError(`${what} must be { inputPerMTok, outputPerMTok } (USD)`);
  }
  const out: Partial<ModelPrice> = {};
  for (const k of ["inputPerMTok", "outputPerMTok"] as const) {
    const n = value[k];
    if (typeof n !== "number" || !Number.isFinite(n) || n < 0) {
      throw new InvalidInputError(
        `${what}.${k} must be a finite number >= 0 (USD per million tokens), not ${String(n)}`,
      );
    }
    out[k] = n;
  }
  return Object.freeze(out as ModelPrice);
}

/** `value` as a table of prices by model name (PR1, PR3), or InvalidInputError naming the key. */
export function checkedPrices(value: unknown, what = "prices"): PriceTable {
  if (value === undefined) return NO_PRICES;
  if (!isRecord(value)) {
    throw new InvalidInputError(
      `${what} must be an object of { inputPerMTok, outputPerMTok } by model name`,
    );
  }
  const out = Object.create(null) as Record<string, ModelPrice>;
  for (const [model, price] of Object.entries(value)) {
    if (model === "") throw new InvalidInputError(`${what} names a model with an empty name`);
    out[model] = checkedPrice(price, `${what}[${JSON.stringify(model)}]`);
  }
  return Object.freeze(out);
}

/** The table's price of `model` (PR2), or undefined. */
export function priceIn(table: PriceTable | undefined, model: string): ModelPrice | undefined {
  return table !== undefined && Object.hasOwn(table, model) ? table[model] : undefined;
}

/** What `input` and `output` tokens cost at `price`, in USD. */
export function costAt(price: ModelPrice, input: number, output: number): number {
  return (input * price.inputPerMTok + output * price.outputPerMTok) / 1_000_000;
}
