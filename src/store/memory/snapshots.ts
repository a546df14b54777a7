/**
 * Snapshots in the memory store (S8): one per execution, kept as JSON text (a copy, which a
 * caller's later changes to its state cannot reach), replaced only by one at a higher `seq`.
 */
import type { Snapshot } from "../../fold/state.ts";
import type { SnapshotStore } from "../spi.ts";
import { live, type Handle } from "./data.ts";

export function memorySnapshots(h: Handle): SnapshotStore {
  const { data } = h;
  return {
    async saveSnapshot(id, snapshot) {
      live(h);
      const prev = data.snapshots.get(id);
      if (prev !== undefined && prev.seq > snapshot.seq) return;
      data.snapshots.set(id, { seq: snapshot.seq, stateJson: JSON.stringify(snapshot.state) });
    },

    async loadSnapshot(id) {
      live(h);
      const snap = data.snapshots.get(id);
      if (snap === undefined) return undefined;
      return { seq: snap.seq, state: JSON.parse(snap.stateJson) as Snapshot["state"] };
    },
  };
}
