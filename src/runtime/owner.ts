/**
 * Owner identity and liveness.
 *
 * An owner id is `<host>/<pid>/<nonce>`. On one machine a lease whose owner process is gone
 * can be taken over at once instead of after its TTL: `process.kill(pid, 0)` answers whether a
 * pid exists. A pid that exists may belong to another process (reuse); that only makes us wait
 * for the TTL, never take over a live owner, so the check can delay recovery but not break it.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";

export function newOwnerId(): string {
  return `${hostname()}/${process.pid}/${randomBytes(4).toString("hex")}`;
}

/** True only when the owner certainly ran on this host in a process that no longer exists. */
export function ownerIsDead(owner: string): boolean {
  const [host, pidText] = owner.split("/");
  if (host !== hostname() || pidText === undefined) return false;
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ESRCH";
  }
}
