#!/usr/bin/env bash
# Runs a command several times in a row while other processes keep the CPUs busy, and stops at
# the first failure: how this project checks that its tests do not depend on which side of a race
# wins (CI runs on a loaded 2-core machine). CONTRIBUTING.md says when to run it.
#
#   tools/under_load.sh [--hogs N] [--runs N] [--limit-s S] -- COMMAND [ARGS...]
#
#   --hogs N     busy-looping processes beside the command (default 2: one per core here)
#   --runs N     how many times the command must pass in a row (default 5)
#   --limit-s S  a deadline for each run, in seconds (default 3600); a run past it fails
#
# Examples:
#   tools/under_load.sh -- ./tutorial test
#   tools/under_load.sh --runs 5 -- ctest --preset cpu -L "multiprocess|launcher|chapter|parity"
#
# Exit 0 when every run passed; otherwise the failing run's exit code (124: past the deadline),
# and the number of the run that failed. The hogs end with this script, however it ends.
set -uo pipefail

hogs=2 runs=5 limit_s=3600
while [ $# -gt 0 ]; do
  case "$1" in
    --hogs) hogs="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --limit-s) limit_s="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "under_load: unknown argument '$1' (usage: $0 [--hogs N] [--runs N] [--limit-s S] -- COMMAND...)" >&2; exit 2 ;;
  esac
done
for value in "$hogs" "$runs" "$limit_s"; do
  case "$value" in
    ''|*[!0-9]*) echo "under_load: '$value' is not a whole number (--hogs, --runs and --limit-s take one)" >&2; exit 2 ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "under_load: no command after '--' (usage: $0 [--hogs N] [--runs N] -- COMMAND...)" >&2
  exit 2
fi

pids=()
stop_hogs() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
# Each hog is bounded too: it ends by itself after every run's deadline has passed.
for _ in $(seq "$hogs"); do
  timeout $((runs * limit_s + 60)) sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "under_load: $hogs busy processes beside $runs run(s) of: $*"

for run in $(seq "$runs"); do
  start=$(date +%s)
  timeout --kill-after=30 "$limit_s" "$@"
  rc=$?
  took=$(($(date +%s) - start))
  if [ $rc -ne 0 ]; then
    echo "under_load: run $run of $runs FAILED (exit $rc) after ${took} s, load $(cut -d' ' -f1-3 /proc/loadavg)"
    exit $rc
  fi
  echo "under_load: run $run of $runs passed in ${took} s, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "under_load: all $runs runs passed"
