/**
 * The store SPI's records of what an execution led to and of who runs: forks by their origin
 * (`ForkStore`) and the fleet's members (`MemberStore`). Part of `Store` (spi.ts); their own
 * module so that the contract's file stays one screenful per group.
 *
 * Contract (the conformance suite checks S21, S22; S1..S20 are spi.ts's):
 * S21. A batch whose `index.forkedFrom` names an origin (fold/index-changes.ts W4: the fork
 *     point's envelope of a fork, runtime/fork.ts V1) records (origin, the batch's execution,
 *     the fork point) in its transaction, only if the batch is appended. `forksOf(origin, limit)`
 *     answers the origin's forks in the order they were recorded (oldest first), at most
 *     `limit`. `deleteExecution(id)` (S13) removes, in its transaction, the rows where `id` is
 *     the fork or the origin: a deleted execution is no one's fork and has none.
 * S22. Members: `heartbeat(member)` creates or replaces the row of `member.owner` whole, and
 *     deletes the rows of other members whose last heartbeat is a day older than this one's (a
 *     crashed member's row, never removed by its close). `members(sinceMs)` answers the rows whose
 *     last heartbeat is at or after `sinceMs`, by owner id; `leaveFleet(owner)` removes the row.
 *     `leasesOf(owner, nowMs, limit)` answers the leases `owner` holds unexpired at `nowMs` (a
 *     released one has no owner), by execution id, at most `limit`. Members survive a reopen (S5)
 *     and are seen by every process sharing the store.
 */

/** A fork as its origin lists it: the fork's id and the origin's sequence number it copied to. */
export interface ForkLink {
  executionId: string;
  seq: number;
}

export interface ForkStore {
  /** The forks made of `originId`, oldest first, at most `limit` (S21). */
  forksOf(originId: string, limit: number): Promise<ForkLink[]>;
}

/** A runtime that runs its background loop, as its heartbeat row records it (S22). */
export interface Member {
  owner: string;
  /** The flows it runs (the ones it recovers and claims). */
  flows: string[];
  startedAtMs: number;
  lastHeartbeatMs: number;
  host?: string;
  pid?: number;
}

/** A lease as its holder's member row shows it (S22). */
export interface HeldLease {
  executionId: string;
  fence: number;
  expiresAtMs: number;
}

/** How long a member row outlives its last heartbeat before another member's deletes it (S22). */
export const MEMBER_ROW_TTL_MS = 24 * 60 * 60 * 1000;

export interface MemberStore {
  /** Writes `member`'s row whole, and drops rows a day staler than it (S22). */
  heartbeat(member: Member): Promise<void>;
  /** The members whose last heartbeat is at or after `sinceMs`, by owner (S22). */
  members(sinceMs: number): Promise<Member[]>;
  /** Removes `owner`'s row: a clean close (S22). */
  leaveFleet(owner: string): Promise<void>;
  /** The leases `owner` holds unexpired at `nowMs`, by execution id, at most `limit` (S22). */
  leasesOf(owner: string, nowMs: number, limit: number): Promise<HeldLease[]>;
}
