export * from "./events.ts";
export * from "./json.ts";
export * from "./errors.ts";
export * from "./clock.ts";
export * from "./ids.ts";
export * from "./limits.ts";
export * from "./resources.ts";
export type { ModelPrice, PriceTable } from "./prices.ts";
export * from "./schema.ts";
