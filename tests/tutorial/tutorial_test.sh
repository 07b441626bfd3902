#!/usr/bin/env bash
# ./tutorial's own logic, without building or running a lesson: how it reads the rank fields of
# the lesson table, where `./tutorial reset` keeps a participant's version, and the backend column
# of `./tutorial doctor` (the library's own choice, asked of tools/backend_probe).
#
#   tutorial_test.sh REPO_ROOT BIN_DIR
set -euo pipefail
root=$1 bin=$2
fail() {
  echo "FAIL: $*"
  exit 1
}

# shellcheck source=/dev/null
source "$root/tutorial" # defines its functions; main runs only when it is executed

# ---- The ranks field: N, N,M (cases on N and on M ranks), MxN (M machines of N ranks).
for case in "2 2" "3 3" "2,4 4" "4,2 4" "2x2 2" "3x1 1" "2,2x3 3"; do
  read -r field want <<<"$case"
  got=$(ranks_per_machine "$field") || fail "ranks_per_machine '$field' refused it"
  [ "$got" = "$want" ] || fail "ranks_per_machine '$field' = $got, want $want"
done
for bad in "" 0 two 2,x 2x x2 -1; do
  if ranks_per_machine "$bad" >/dev/null 2>&1; then fail "ranks_per_machine accepted '$bad'"; fi
done
echo "ok    ranks per machine: N, N,M and MxN read as the most ranks on one machine"

# ---- reset: the starter back from git, the participant's version kept outside build/ (so that
# rm -rf build keeps it) and ignored by git. In a git repository of its own, made here: the
# source tree is never touched.
if ! command -v git >/dev/null 2>&1; then
  echo "skip  reset: no git here (reset restores a starter from git's HEAD)"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  starter=chapters/04_all_reduce/exercises/ex1_weighted_mean.cpp
  mkdir -p "$tmp/$(dirname "$starter")" "$tmp/tools"
  cp "$root/tutorial" "$root/.gitignore" "$tmp/"
  cp -r "$root/tools/tutorial" "$tmp/tools/"
  cp "$root/chapters/lessons.txt" "$tmp/chapters/"
  cp "$root/$starter" "$tmp/$starter"
  git -C "$tmp" init -q
  git -C "$tmp" add -A
  git -C "$tmp" -c user.name=test -c user.email=test@test.invalid commit -q -m starter
  echo "// my attempt" >>"$tmp/$starter"
  said=$("$tmp/tutorial" reset 04-ex1 2>&1) || fail "tutorial reset 04-ex1 failed: $said"
  kept=$(find "$tmp/exercises-kept" -name '*-ex1_weighted_mean.cpp' 2>/dev/null)
  if [ -z "$kept" ] || [ "$(wc -l <<<"$kept")" -ne 1 ]; then
    fail "reset kept no copy in exercises-kept/: $said"
  fi
  tail -n 1 "$kept" | grep -qx "// my attempt" || fail "the kept copy is not the participant's version"
  cmp -s "$root/$starter" "$tmp/$starter" || fail "reset did not put the starter back"
  grep -q "kept in exercises-kept/" <<<"$said" || fail "reset did not say where it kept the version: $said"
  [ ! -e "$tmp/build" ] || fail "reset wrote into build/"
  [ -z "$(git -C "$tmp" status --porcelain)" ] || fail "git does not ignore exercises-kept/: $(git -C "$tmp" status --porcelain)"
  grep -q "exercises-kept/" <<<"$("$tmp/tutorial" --help)" || fail "--help does not say where reset keeps a version"
  echo "ok    reset: the starter back, the attempt kept in exercises-kept/ (git-ignored, not in build/)"
fi

# ---- backend_probe: one line per count, the library's choice and its reason.
out=$("$bin/backend_probe" 1 2 4)
[ "$(wc -l <<<"$out")" -eq 3 ] || fail "backend_probe 1 2 4 printed: $out"
while IFS=$'\t' read -r n backend why; do
  case $backend in gloo | nccl) ;; *) fail "backend_probe: '$backend' for $n ranks" ;; esac
  [ -n "$why" ] || fail "backend_probe gave no reason for $n ranks"
  if [ ! -e /proc/driver/nvidia/version ] && [ "$backend" != gloo ]; then
    fail "backend_probe chose $backend for $n ranks on a machine without an NVIDIA driver"
  fi
done <<<"$out"
if "$bin/backend_probe" 0 >/dev/null 2>&1; then fail "backend_probe accepted 0 ranks"; fi
echo "ok    backend_probe: $(head -n 1 <<<"$out" | tr '\t' ' ')"

# ---- doctor: a row per lesson with its ranks per machine and the probe's answer for them.
report=$("$root/tutorial" doctor 2>&1) || fail "tutorial doctor failed: $report"
if grep -q "build first" <<<"$report"; then
  echo "ok    doctor: no build/cpu or build/cuda here to ask; the rank fields were read above"
  exit 0
fi
for row in "10 2,4 4" "multinode 2x2 2" "09-ex1 3 3" "01 2 2"; do
  read -r lesson ranks per <<<"$row"
  grep -Eq "^  $lesson +$ranks +$per +(gloo|nccl)\$" <<<"$report" ||
    fail "doctor has no row '$lesson $ranks $per <backend>':"$'\n'"$report"
done
echo "ok    doctor: lessons 10 (2,4), multinode (2x2) and 09-ex1 (3) have their backend rows"
