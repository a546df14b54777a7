import { memoryStore } from "../src/store/memory/index.ts";
import { runStoreConformance } from "../src/store/conformance/index.ts";

runStoreConformance({
  name: "memory",
  newStore: (hooks) => memoryStore(hooks),
  reopen: async (store) => {
    await store.close();
    return store.reopen();
  },
});
