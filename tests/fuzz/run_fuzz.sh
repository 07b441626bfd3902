#!/bin/sh
# run_fuzz.sh FUZZER CORPUS SECONDS: runs the libFuzzer target for SECONDS, starting from the
# committed CORPUS (never written to: new inputs go to a temporary directory, deleted after).
# Exit 0 when nothing was found; otherwise libFuzzer's report, the crashing input's path and a
# non-zero exit.
set -eu
fuzzer=$1 corpus=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir new
# -timeout: one input taking 10 s is a hang; -rss_limit_mb: a leak or a runaway allocation.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" new "$corpus" 2>fuzz.log || {
  status=$?
  tail -n 60 fuzz.log
  for crash in "$work"/crash-* "$work"/timeout-* "$work"/leak-* "$work"/oom-*; do
    [ -e "$crash" ] && echo "input that failed (hex):" && od -An -tx1 "$crash" | head -20
  done
  exit "$status"
}
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|Done [0-9]+ runs" fuzz.log || true
echo "store_fuzz: no crash, hang or leak in $seconds s"
