import { describe, expect, it } from "vitest";
import { memoryStore } from "../src/store/memory/index.ts";
import { runFleetConformance, runStoreConformance } from "../src/testing/index.ts";
import { isFleetStore } from "../src/store/spi.ts";

runStoreConformance({
  name: "memory",
  newStore: (hooks) => memoryStore(hooks),
  reopen: async (store) => {
    await store.close();
    return store.reopen();
  },
});

// A fleet's memory store passes the plain suite too: its handles are stores like any other.
runStoreConformance({
  name: "memory (fleet)",
  newStore: (hooks) => memoryStore({ ...hooks, fleet: true }),
  reopen: async (store) => {
    await store.close();
    return store.reopen();
  },
});

// Two processes of a fleet are two handles open over the same data.
runFleetConformance({
  name: "memory",
  newStore: (hooks) => memoryStore({ ...hooks, fleet: true }),
  peer: (store) => store.reopen(),
});

describe("memory store: fleet is opt-in", () => {
  it("is no FleetStore unless asked, and neither is what it reopens", () => {
    const plain = memoryStore();
    const hooked = memoryStore({ beforeCommit: () => undefined });
    for (const store of [plain, plain.reopen(), hooked, memoryStore({ fleet: false })]) {
      expect(isFleetStore(store)).toBe(false);
      expect("claimRunnable" in store || "listen" in store).toBe(false);
    }
    const fleet = memoryStore({ fleet: true });
    expect(isFleetStore(fleet)).toBe(true);
    expect(isFleetStore(fleet.reopen())).toBe(true);
  });

  it("a closed handle claims nothing and hears nothing more; the others still do", async () => {
    const store = memoryStore({ fleet: true });
    const peer = store.reopen();
    const heard: string[] = [];
    await store.listen((w) => heard.push(`store ${w.kind}`));
    await peer.listen((w) => heard.push(`peer ${w.kind}`));
    await store.close();
    await expect(
      store.claimRunnable("c", { flows: ["f"], limit: 1, ttlMs: 1, nowMs: 0 }),
    ).rejects.toThrow("memory store used after close");
    await expect(store.listen(() => undefined)).rejects.toThrow("memory store used after close");
    await peer.appendMessage("chain", { topic: "t", key: "k", payload: null, atMs: 0 });
    await Promise.resolve();
    expect(heard).toEqual(["peer message"]);
  });
});
