#!/usr/bin/env bash
# Runs a command with every fsync and fdatasync of its processes delayed by DELAY_US microseconds
# (strace's fault injection), to model a disk whose flush is slower than this machine's: a cloud
# block device commits in 0.5-2 ms where this machine's virtual disk takes 0.1-0.3 ms. The delay
# is added on return from the call, so the data is as durable as without it; the command's own
# baseline (a raw insert in the same process) pays it too. Used by docs/benchmarks.md ("start":
# the model) as `scripts/slow-fsync.sh 1000 npm run bench -- start --store sqlite`.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/slow-fsync.sh DELAY_US COMMAND [ARGS...]" >&2
  exit 2
fi
delay="$1"
shift
command -v strace > /dev/null || { echo "slow-fsync: strace is not installed" >&2; exit 1; }
exec strace -f --seccomp-bpf -o /dev/null -e trace=fsync,fdatasync \
  -e inject=fsync:delay_exit="$delay" -e inject=fdatasync:delay_exit="$delay" "$@"
