export {
  memoryStore,
  type MemoryFleetStore,
  type MemoryStore,
  type MemoryStoreOptions,
} from "./memory-store.ts";
