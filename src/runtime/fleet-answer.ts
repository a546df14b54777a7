/**
 * What `runtime.fleet()` answers (members.ts M3): the dashboard's `GET /api/fleet` sends it as
 * it is (ui/api-types.ts FleetAnswer has the same shape, and tsc checks the two agree where the
 * dashboard hands one for the other).
 */
import type { HeldLease, Member } from "../store/spi.ts";

/** A live member with the leases it holds now. */
export interface FleetMemberRow extends Member {
  leases: HeldLease[];
}

export interface FleetAnswer {
  members: FleetMemberRow[];
  /** The reader's clock when it read (a member's age is `nowMs - lastHeartbeatMs`). */
  nowMs: number;
}
