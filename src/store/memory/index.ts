export { memoryStore, type MemoryStore } from "./memory-store.ts";
