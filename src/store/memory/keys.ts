/**
 * Key material in the memory store (S19): part of the data, so a reopen keeps it (S5). `putKey`
 * runs whole within one call, so of two puts of one id both get the material that won;
 * `listKeys` orders ids by their UTF-8 bytes, as the SQL stores do (../key-range.ts K1).
 */
import { compareKeyIds } from "../key-range.ts";
import type { KeyStore } from "../spi.ts";
import { live, type Handle } from "./data.ts";

export function memoryKeys(h: Handle): KeyStore {
  const { data } = h;
  return {
    async putKey(keyId, material) {
      live(h);
      const stored = data.keys.get(keyId);
      if (stored !== undefined) return stored;
      data.keys.set(keyId, material);
      return material;
    },

    async getKey(keyId) {
      live(h);
      return data.keys.get(keyId);
    },

    async listKeys(prefix) {
      live(h);
      return [...data.keys.keys()].filter((id) => id.startsWith(prefix)).sort(compareKeyIds);
    },

    async destroyKey(keyId) {
      live(h);
      // A JavaScript string cannot be wiped: dropping the last reference is all a heap allows.
      return { existed: data.keys.delete(keyId) };
    },
  };
}
