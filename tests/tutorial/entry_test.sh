#!/usr/bin/env bash
# ./tutorial as an entry point, without building or running anything: it stays a dispatcher of at
# most 400 lines that sources its tools from tools/tutorial/; `bench` passes its flags to
# bench/run.py, which refuses the ones it does not know with its own message; `run --preset P`
# builds and runs build/P/bin, and refuses an unknown preset or a cuda preset without the CUDA
# toolkit. Building and running are replaced by functions that write down what they were asked.
#
#   entry_test.sh REPO_ROOT
set -euo pipefail
root=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# ---- Size and parts: a dispatcher, and every file of tools/tutorial/ sourced by it.
limit=400
lines=$(wc -l <"$root/tutorial")
[ "$lines" -le $limit ] || fail "./tutorial has $lines lines, more than $limit: move a tool of its own into tools/tutorial/ (the file's comment after 'set -euo pipefail' lists them)"
parts=$(sed -n 's/^for part in \(.*\); do$/\1/p' "$root/tutorial")
[ -n "$parts" ] || fail "./tutorial has no line 'for part in ...; do' that sources tools/tutorial/"
for file in "$root"/tools/tutorial/*.sh; do
  name=$(basename "$file" .sh)
  grep -qw -- "$name" <<<"$parts" || fail "tools/tutorial/$name.sh is not sourced by ./tutorial (for part in $parts)"
  sed -n 2p "$file" | grep -q "^# tools/tutorial/$name.sh — " || fail "tools/tutorial/$name.sh does not open with a header comment naming it"
done
echo "ok    ./tutorial has $lines lines (at most $limit); it sources $(wc -w <<<"$parts") files of tools/tutorial/, each with a header"

# shellcheck source=/dev/null
source "$root/tutorial" # defines its functions; main runs only when it is executed
load_lessons
set +e # each case below checks its exit code itself
record=$scratch/record
ensure_packages() { :; } # installed (tests/tutorial/setup_test.sh tests the real one)
build() { echo "build $*" >>"$record"; }
show_and_run() { echo "+ $*" >>"$record"; }

# ---- bench: the flags go to bench/run.py, which is the one that knows them.
bench() { # bench ARGS...: cmd_bench's output and exit code ("rc=N" last); what ran is in $record
  local out rc
  : >"$record"
  out=$(cmd_bench "$@" 2>&1)
  rc=$?
  printf '%s\nrc=%s\n' "$out" "$rc"
}
out=$(bench --bogus-flag 3)
grep -qx "rc=2" <<<"$out" || fail "bench --bogus-flag: want exit 2:"$'\n'"$out"
grep -qF "bench/run.py: error: unrecognized arguments: --bogus-flag" <<<"$out" ||
  fail "bench --bogus-flag is not refused by run.py, naming it:"$'\n'"$out"
for flag in --quick --worlds --max-mib --repeat --sweeps --life-runs --sections --sharding-samples; do
  grep -qF -- "[$flag" <<<"$out" || fail "bench --bogus-flag: run.py's message does not list $flag:"$'\n'"$out"
done
[ ! -s "$record" ] || fail "bench --bogus-flag built or ran something: $(cat "$record")"
out=$(bench --quic)
grep -qx "rc=2" <<<"$out" && grep -qF "unrecognized arguments: --quic" <<<"$out" ||
  fail "bench --quic (an abbreviation) was not refused:"$'\n'"$out"
out=$(bench --worlds 2,x)
grep -qx "rc=2" <<<"$out" && grep -qF "argument --worlds: want world sizes like 2,4, got '2,x'" <<<"$out" ||
  fail "bench --worlds 2,x was not refused by run.py:"$'\n'"$out"
out=$(bench --out /tmp)
grep -qx "rc=2" <<<"$out" && grep -qF "bench reads build/release/bin and writes build/bench itself" <<<"$out" ||
  fail "bench --out was not refused:"$'\n'"$out"
[ ! -s "$record" ] || fail "a refused bench built or ran something: $(cat "$record")"
echo "ok    bench: an unknown flag reaches bench/run.py and is refused there (exit 2, its usage line); nothing is built"

out=$(bench --quick --life-runs 2 --sections=startup)
grep -qx "rc=0" <<<"$out" || fail "bench --quick --life-runs 2 --sections=startup: $out"
want="build release"$'\n'"+ /usr/bin/python3 bench/run.py --bin build/release/bin --out build/bench --quick --life-runs 2 --sections=startup"
[ "$(cat "$record")" = "$want" ] || fail "bench --quick --life-runs 2 --sections=startup ran:"$'\n'"$(cat "$record")"$'\n'"want:"$'\n'"$want"
show_and_run() { echo "+ $*" >>"$record" && "$@"; } # run.py's help is printed, then
out=$(bench --help)
show_and_run() { echo "+ $*" >>"$record"; }
grep -qx "rc=0" <<<"$out" && grep -qF -- "--sharding-samples SHARDING_SAMPLES" <<<"$out" && grep -qF "/usr/bin/python3 bench/run.py --help" "$record" ||
  fail "bench --help does not show run.py's help:"$'\n'"$out"
grep -q "^build" "$record" && fail "bench --help built something: $(cat "$record")"
echo "ok    bench: run.py's flags pass through as they are (--life-runs too); --help is run.py's"

# ---- run --preset: build/P/bin, built with the preset P; cpu when not given.
run() { # run ARGS...: run_lesson's output and exit code ("rc=N" last); what ran is in $record
  local out rc
  : >"$record"
  out=$(run_lesson "$@" 2>&1)
  rc=$?
  printf '%s\nrc=%s\n' "$out" "$rc"
}
expect() { # expect WHAT WANT: $record holds exactly WANT
  [ "$(cat "$record")" = "$2" ] || fail "$1 ran:"$'\n'"$(cat "$record")"$'\n'"want:"$'\n'"$2"
}
touch "$scratch/nvcc" && chmod +x "$scratch/nvcc"
# shellcheck disable=SC2034 # read by run_lesson
CUDA_NVCC=$scratch/nvcc # a CUDA toolkit, as far as run_lesson can tell
p01=${L_PROGRAM[$(lesson_index 01)]} p10=${L_PROGRAM[$(lesson_index 10)]}
p03=${L_PROGRAM[$(lesson_index 03)]}

out=$(run 01)
grep -qx "rc=0" <<<"$out" || fail "run 01: $out"
expect "run 01" "build cpu ddprun $p01"$'\n'"+ build/cpu/bin/ddprun --standalone --nproc-per-node 2 build/cpu/bin/$p01"
out=$(run 01 --preset cuda --nproc 3 -- --backend nccl)
grep -qx "rc=0" <<<"$out" || fail "run 01 --preset cuda: $out"
expect "run 01 --preset cuda" "build cuda ddprun $p01"$'\n'"+ build/cuda/bin/ddprun --standalone --nproc-per-node 3 build/cuda/bin/$p01 --backend nccl"
out=$(run --preset cuda 01 -- --backend gloo)
grep -qx "rc=0" <<<"$out" || fail "run --preset cuda 01: $out"
expect "run --preset cuda 01" "build cuda ddprun $p01"$'\n'"+ build/cuda/bin/ddprun --standalone --nproc-per-node 2 build/cuda/bin/$p01 --backend gloo"
out=$(run --preset cuda)
grep -qx "rc=2" <<<"$out" && grep -qF "run needs a lesson name" <<<"$out" || fail "run --preset cuda (no lesson): $out"
out=$(run 01 --preset=release)
expect "run 01 --preset=release" "build release ddprun $p01"$'\n'"+ build/release/bin/ddprun --standalone --nproc-per-node 2 build/release/bin/$p01"
out=$(run 10 --preset cuda mismatched-size)
expect "run 10 --preset cuda" "build cuda ddprun $p10"$'\n'"+ build/cuda/bin/$p10 mismatched-size"
out=$(run 03 --preset cuda)
expect "run 03 --preset cuda" "build cuda"$'\n'"+ /usr/bin/python3 $p03 run build/cuda/bin"
echo "ok    run --preset P: builds with P and runs build/P/bin (ddprun, driver and two_programs lessons); cpu by default"

out=$(run 01 --preset no-such-preset)
grep -qx "rc=2" <<<"$out" && grep -qF "unknown preset 'no-such-preset' for run; CMakePresets.json's build presets are: cpu, cuda" <<<"$out" ||
  fail "run --preset no-such-preset: $out"
[ ! -s "$record" ] || fail "run --preset no-such-preset built or ran: $(cat "$record")"
out=$(CUDA_NVCC=$scratch/no-nvcc run 01 --preset cuda)
grep -qx "rc=2" <<<"$out" && grep -qF -- "--preset cuda needs the CUDA toolkit with NCCL ($scratch/no-nvcc" <<<"$out" ||
  fail "run --preset cuda without the CUDA toolkit: $out"
[ ! -s "$record" ] || fail "run --preset cuda without the toolkit built or ran: $(cat "$record")"
out=$(run 01 --preset)
grep -qx "rc=2" <<<"$out" && grep -qF -- "--preset needs a name" <<<"$out" || fail "run 01 --preset: $out"
echo "ok    run --preset: an unknown preset, the cuda preset without the CUDA toolkit and a missing name stop with exit 2, before building"
