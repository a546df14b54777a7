import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import type { Store, StoreHooks } from "../src/store/spi.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { runStoreConformance } from "../src/store/conformance/index.ts";

const dirs: string[] = [];
const paths = new WeakMap<Store, string>();
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function open(path: string, hooks?: StoreHooks): Store {
  const store = sqliteStore(path, { synchronous: "NORMAL", hooks });
  paths.set(store, path);
  return store;
}

runStoreConformance({
  name: "sqlite",
  newStore: (hooks) => {
    const dir = mkdtempSync(join(tmpdir(), "loom-sqlite-"));
    dirs.push(dir);
    return open(join(dir, "loom.db"), hooks);
  },
  reopen: async (store) => {
    const path = paths.get(store);
    if (path === undefined) throw new Error("reopen of a store this file did not open");
    await store.close();
    return open(path);
  },
});
