/**
 * Owner identity and liveness.
 *
 * An owner id is `<host>/<pid namespace>/<pid>/<nonce>`. On one machine a lease whose owner
 * process is gone can be taken over at once instead of after its TTL: `process.kill(pid, 0)`
 * answers whether a pid exists. The pid namespace is part of the identity because containers
 * that share a host name have pids of their own; an owner in another namespace is never judged
 * dead. A pid that exists may belong to another process (reuse); that only makes us wait for
 * the TTL, never take over a live owner, so the check can delay recovery but not break it.
 */
import { readlinkSync } from "node:fs";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";

function pidNamespace(): string {
  try {
    return readlinkSync("/proc/self/ns/pid").replace(/[^0-9]/g, "") || "0";
  } catch {
    return "0";
  }
}

const here = `${hostname()}/${pidNamespace()}`;

export function newOwnerId(): string {
  return `${here}/${process.pid}/${randomBytes(4).toString("hex")}`;
}

/** True only when the owner certainly ran in this host's pid namespace and its process is gone. */
export function ownerIsDead(owner: string): boolean {
  const parts = owner.split("/");
  if (parts.length !== 4 || `${parts[0]}/${parts[1]}` !== here) return false;
  const pid = Number(parts[2]);
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ESRCH";
  }
}
