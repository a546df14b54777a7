/**
 * Numbers for people to read, the same in `loom show` and anywhere else a person reads a cost
 * (issue 25 item 5).
 *
 * N1. A cost in USD prints with its currency sign and at most four significant digits, grouped
 *     by thousands and never in exponent form: 0.0008399999999999999 (a sum of float prices) is
 *     "$0.00084", 1234.5678 is "$1,235", 1e-7 is "$0.0000001". The exact figure stays in the
 *     state and in `--json`.
 */
let usdFormat: Intl.NumberFormat | undefined;

/** N1: `usd` as a person reads it. */
export function formatUsd(usd: number): string {
  // Made on first use: a NumberFormat loads the locale data, about 10 MB of a process that
  // imports Loom and never prints a cost (the footprint bench, issue 12).
  usdFormat ??= new Intl.NumberFormat("en-US", {
    style: "currency",
    currency: "USD",
    maximumSignificantDigits: 4,
  });
  return usdFormat.format(usd);
}
