export * from "./state.ts";
export * from "./fold.ts";
export * from "./index-changes.ts";
export { callFrame, callsOf, isRecorded } from "./settled.ts";
