export { runStoreConformance, type StoreConformanceOptions } from "./conformance.ts";
