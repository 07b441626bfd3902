#!/usr/bin/env bash
# ./tutorial run NN --panes: a tmux session with one pane per rank and one for ddprun. The session
# is started detached on a tmux server of the test's own (TMUX_TMPDIR), so no terminal is needed;
# tmux capture-pane reads what each pane shows. Every wait has a deadline, and the server is
# killed at the end whatever happens.
#
#   panes_test.sh REPO_ROOT BIN_DIR
set -euo pipefail
root=$1 bin=$(cd "$2" && pwd)
fail() {
  echo "FAIL: $*"
  exit 1
}
command -v tmux >/dev/null 2>&1 || fail "tmux is not installed (apt-get install tmux; it is in the test packages)"
[ -x "$bin/ch01_get_dist_info" ] || fail "build ch01_get_dist_info and ddprun first ($bin)"

work=$(mktemp -d "${TMPDIR:-/tmp}/panes-test.XXXXXX")
export TMUX_TMPDIR=$work TMPDIR=$work
unset TMUX
trap 'tmux kill-server 2>/dev/null || true; rm -rf "$work"' EXIT

# shellcheck source=/dev/null
source "$root/tutorial" # defines its functions; main runs only when it is executed
load_lessons
# shellcheck disable=SC2034 # both are read by run_lesson
BIN=$bin BUILT=1 # the programs of this build; nothing to install or build

# ---- What stops it, with exit code 2 and what to do.
expect_refusal() { # expect_refusal WHAT TEXT COMMAND...: exits 2, and says TEXT
  local what=$1 text=$2 out code=0
  shift 2
  out=$("$@" 2>&1 </dev/null) || code=$?
  [ "$code" -eq 2 ] || fail "$what: exit code $code, want 2: $out"
  grep -qF -- "$text" <<<"$out" || fail "$what: the message does not say '$text': $out"
  echo "ok    $what: exit 2, '$text'"
}
# A PATH without tmux, with the few tools the install line is worked out with (os-release, uid).
mkdir "$work/no-tmux"
for tool in sed head id; do ln -s "$(command -v $tool)" "$work/no-tmux/$tool"; done
expect_refusal "no tmux" "apt-get install -y --no-install-recommends tmux" \
  env PATH="$work/no-tmux" "$BASH" -c "source '$root/tutorial'; load_lessons; BIN=$bin BUILT=1; run_lesson 01 --panes"
expect_refusal "no terminal" "add --detach" run_lesson 01 --panes
expect_refusal "not a ddprun lesson" "run it without --panes" run_lesson 10 --panes --detach
expect_refusal "--detach alone" "--detach goes with --panes" run_lesson 01 --detach

# ---- Three ranks (an odd count), detached.
ranks=3 session=tutorial-01
run_lesson 01 --panes --detach --nproc $ranks </dev/null >"$work/run.out" 2>&1 ||
  fail "run 01 --panes --detach failed: $(cat "$work/run.out")"
grep -qF "tmux kill-session -t $session" "$work/run.out" || fail "it does not say how to end it: $(cat "$work/run.out")"
grep -qF "tmux attach -t $session" "$work/run.out" || fail "it does not say how to look: $(cat "$work/run.out")"

pane_of() { # pane_of TITLE: the pane's id
  tmux list-panes -t "$session:0" -F '#{pane_title}|#{pane_id}' | sed -n "s/^$1|//p"
}
shows() { tmux capture-pane -p -J -S - -t "$1"; } # everything the pane has shown

# Done when ddprun's pane says the job ended and every rank's pane has that rank's last line
# (a rank's pane may show its last line after ddprun's says the job ended: wait for both).
finished() {
  shows "$(pane_of ddprun)" | grep -q "the job ended with exit code" || return 1
  for ((r = 0; r < ranks; r++)); do
    shows "$(pane_of "rank $r")" | grep -qF "[rank $r/$ranks] after destroy_process_group()" ||
      return 1
  done
}
deadline=$((SECONDS + 60))
until finished; do
  [ $SECONDS -lt $deadline ] || {
    tmux list-panes -t "$session:0" -F '#{pane_title}|#{pane_id}'
    for title in ddprun "rank 0" "rank 1" "rank 2"; do echo "== $title"; shows "$(pane_of "$title")" || true; done
    fail "the panes did not show the finished job within 60 s"
  }
  sleep 0.3
done

[ "$(tmux list-panes -t "$session:0" | wc -l)" -eq $((ranks + 1)) ] || fail "want $((ranks + 1)) panes"
ddprun_pane=$(shows "$(pane_of ddprun)")
grep -qF "the job ended with exit code 0" <<<"$ddprun_pane" || fail "ddprun's pane: $ddprun_pane"
grep -qF "ddprun: starting $ranks ranks" <<<"$ddprun_pane" || fail "ddprun's pane: $ddprun_pane"
grep -qF "tmux kill-session -t $session" <<<"$ddprun_pane" || fail "ddprun's pane: $ddprun_pane"
! grep -qF "[rank " <<<"$ddprun_pane" || fail "ddprun's pane shows ranks' lines: $ddprun_pane"
for ((r = 0; r < ranks; r++)); do
  text=$(shows "$(pane_of "rank $r")")
  [ "$(grep -cF "[rank $r/$ranks]" <<<"$text")" -ge 5 ] || fail "rank $r's pane: $text"
  for ((other = 0; other < ranks; other++)); do
    [ $other -eq $r ] && continue
    ! grep -qF "[rank $other/$ranks]" <<<"$text" || fail "rank $r's pane shows rank $other's lines: $text"
  done
done
echo "ok    $ranks rank panes, each with its own rank's lines only; ddprun's pane with ddprun's"
expect_refusal "the session exists" "tmux kill-session -t $session" run_lesson 01 --panes --detach

# ---- Enter in ddprun's pane ends the session.
tmux send-keys -t "$(pane_of ddprun)" Enter
deadline=$((SECONDS + 10))
while tmux has-session -t "=$session" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "Enter in ddprun's pane did not end the session within 10 s"
  sleep 0.2
done
echo "ok    Enter in ddprun's pane ends the session"
