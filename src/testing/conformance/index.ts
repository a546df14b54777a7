export { runStoreConformance, type StoreConformanceOptions } from "./conformance.ts";
export { runFleetConformance, type FleetConformanceOptions } from "./fleet.ts";
