/**
 * vitest's global setup for the processes tests start (issue 21 item 10); its invariants are
 * P1-P3 in test/support/processes.ts. Setup makes a run directory and names it, with a marker
 * for this run, in the environment that vitest's workers and every child inherit; teardown
 * SIGKILLs every recorded process group, then every process still carrying the marker that is
 * not vitest itself or one of its workers, and removes the directory.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** What a process runs, for the teardown's report; "" once it is gone or without /proc. */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ").trim();
  } catch {
    return "";
  }
}

function killGroup(pgid: number): boolean {
  const command = commandOf(pgid);
  try {
    process.kill(-pgid, "SIGKILL");
    process.stderr.write(`loom: killed process group ${pgid} (${command || "leader gone"})\n`);
    return true;
  } catch {
    return false; // ESRCH: the group has ended, as it should have.
  }
}

/** Pids (Linux /proc) whose environment holds `marker`, other than vitest and its workers. */
function marked(marker: string): number[] {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return []; // No /proc: the process groups are the only net.
  }
  const found: number[] = [];
  for (const pid of pids.map(Number)) {
    if (pid === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(marker)) continue;
      // Field 4 of stat is the parent pid; the command name (field 2) may hold spaces.
      const ppid = Number(
        readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.split(" ")[1],
      );
      if (ppid !== process.pid) found.push(pid);
    } catch {
      // Gone, or not ours to read.
    }
  }
  return found;
}

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), "loom-test-run-"));
  const run = `LOOM_TEST_RUN=${dir}`;
  process.env.LOOM_TEST_RUN_DIR = dir;
  process.env.LOOM_TEST_RUN = dir;
  return () => {
    let pgids: number[] = [];
    try {
      pgids = readFileSync(join(dir, "pgids"), "utf8").split("\n").filter(Boolean).map(Number);
    } catch {
      // No test started a process.
    }
    const groups = [...new Set(pgids)].filter(killGroup);
    const strays = marked(run).filter((pid) => {
      try {
        const command = commandOf(pid);
        process.kill(pid, "SIGKILL");
        process.stderr.write(`loom: killed stray process ${pid} (${command})\n`);
        return true;
      } catch {
        return false;
      }
    });
    if (groups.length + strays.length > 0) {
      process.stderr.write(
        `loom: the suite's teardown killed ${groups.length} process group(s) and ` +
          `${strays.length} stray process(es) that tests left running\n`,
      );
    }
    rmSync(dir, { recursive: true, force: true });
  };
}
