/** The `pg` driver, loaded on first use: an optional peer of `loomwork/postgres` (issue 19). */
import type pg from "pg";
import { requirePeer } from "../../peers.ts";

/** The driver module; MissingDependencyError naming `pg` when it is not installed. */
export function pgDriver(): typeof pg {
  return requirePeer<typeof pg>("pg", "loomwork/postgres");
}
