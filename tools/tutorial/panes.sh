# shellcheck shell=bash
# tools/tutorial/panes.sh — ./tutorial run NN --panes: a ddprun job shown in tmux, a pane per rank.
#
# Sourced by ./tutorial: run_lesson calls panes_can_start and run_in_panes; the panes themselves
# run ./tutorial _pane-rank and ./tutorial _pane-ddprun (pane_rank, pane_ddprun below). Uses ROOT,
# say and die from ./tutorial, and install_command and distro from setup.sh. Tested by
# tests/tutorial/panes_test.sh.

# ---- Live demo panes (run NN --panes) ---------------------------------------------------------
# The job runs in a tmux session with one pane per rank and one for ddprun, so that a room sees
# every rank's output side by side. ddprun writes each rank's stdout and stderr to its own files
# (--log-dir DIR --redirects 3: DIR/none_XXXXXX/attempt_0/RANK/{stdout,stderr}.log), and each
# rank's pane follows its two files with tail -F; ddprun's pane shows ddprun's own lines. When the
# job ends, everything stays on screen until Enter in ddprun's pane (or tmux kill-session).
PANES_WAIT_S=30 # how long a rank's pane waits for its log files before it gives up

panes_session() { printf 'tutorial-%s\n' "$1"; } # panes_session LESSON: the tmux session's name

# Says what is missing, and stops with exit code 2, when the panes cannot be shown here.
panes_can_start() { # panes_can_start LESSON DETACH
  local session
  session=$(panes_session "$1")
  if ! command -v tmux >/dev/null 2>&1; then
    local command
    command=$(install_command "$(distro)" "${PANES_PACKAGES[@]}")
    die "--panes needs tmux, which is not installed; install it (${command:-the tmux package of this system}), or run without --panes"
  fi
  if [ "$2" -eq 0 ] && { [ ! -t 0 ] || [ ! -t 1 ]; }; then
    die "--panes attaches this terminal to tmux, but stdin or stdout is not a terminal; run it in a terminal, or add --detach to start the session without attaching (then: tmux attach -t $session)"
  fi
  if tmux has-session -t "=$session" 2>/dev/null; then
    die "tmux session '$session' exists already: look at it (tmux attach -t $session) or end it (tmux kill-session -t $session), then run again"
  fi
}

run_in_panes() { # run_in_panes LESSON DETACH NPROC DDPRUN PROGRAM [ARGS...]
  local lesson=$1 detach=$2 nproc=$3 ddprun=$4 session logs r pane
  shift 4
  session=$(panes_session "$lesson")
  logs=$(mktemp -d "${TMPDIR:-/tmp}/tutorial-panes-$lesson.XXXXXX")
  local job=("$ddprun" --standalone --nproc-per-node "$nproc" --log-dir "$logs" --redirects 3 "$@")
  say "tutorial: starting tmux session '$session': one pane per rank and one for ddprun; logs in $logs"
  say "+ ${job[*]}   (in ddprun's pane)"
  # Rank 0's pane starts the session; a large virtual size, so that a detached session (no
  # terminal yet) has room for every pane.
  tmux new-session -d -s "$session" -x 240 -y 60 "$ROOT/tutorial" _pane-rank "$logs" 0
  tmux set-option -t "$session" pane-border-status top \; \
    set-option -t "$session" pane-border-format ' #{pane_title} ' \; \
    set-option -w -t "$session" remain-on-exit on \; \
    select-pane -t "$session:0.0" -T "rank 0" >/dev/null
  for ((r = 1; r < nproc; r++)); do
    pane=$(tmux split-window -d -P -F '#{pane_id}' -t "$session:0" "$ROOT/tutorial" _pane-rank "$logs" "$r")
    tmux select-pane -t "$pane" -T "rank $r" \; select-layout -t "$session:0" tiled >/dev/null
  done
  pane=$(tmux split-window -P -F '#{pane_id}' -t "$session:0" "$ROOT/tutorial" _pane-ddprun "$session" "$logs" "${job[@]}")
  tmux select-pane -t "$pane" -T ddprun \; select-layout -t "$session:0" tiled >/dev/null
  say "tutorial: leave with Ctrl-b d (the job goes on; tmux attach -t $session comes back); end it"
  say "  with: tmux kill-session -t $session. When the job ends, the panes stay for the room to read;"
  say "  Enter in ddprun's pane then ends the session."
  if [ "$detach" -eq 1 ]; then
    say "tutorial: started detached; look at it with: tmux attach -t $session"
    return 0
  fi
  if [ -n "${TMUX:-}" ]; then
    tmux switch-client -t "$session" # inside tmux already: switch to it rather than nest
    return 0
  fi
  tmux attach-session -t "$session" || true
  if [ -f "$logs/exit_code" ]; then
    return "$(cat "$logs/exit_code")"
  fi
  say "tutorial: detached; the job goes on in tmux session '$session' (tmux attach -t $session)"
}

# The pane of one rank: waits for ddprun to create the rank's log files, then follows both.
pane_rank() { # pane_rank LOGS RANK
  local logs=$1 rank=$2 folder=""
  local deadline=$((SECONDS + PANES_WAIT_S))
  while :; do
    folder=$(compgen -G "$logs/none_*/attempt_0/$rank" || true)
    [ -n "$folder" ] && [ -e "$folder/stdout.log" ] && [ -e "$folder/stderr.log" ] && break
    if [ $SECONDS -ge $deadline ]; then
      say "tutorial: rank $rank's log files did not appear in $logs within $PANES_WAIT_S s; ddprun's pane says why"
      return 1
    fi
    sleep 0.2
  done
  exec tail -n +1 -q -F "$folder/stdout.log" "$folder/stderr.log"
}

# ddprun's pane: runs the job, keeps its exit code for ./tutorial, then waits for Enter.
pane_ddprun() { # pane_ddprun SESSION LOGS DDPRUN [ARGS...]
  local session=$1 logs=$2 code=0
  shift 2
  say "tutorial: session '$session': each rank's output is in its own pane (from $logs);"
  say "  leave with Ctrl-b d, end with: tmux kill-session -t $session"
  say "+ $*"
  "$@" || code=$?
  printf '%s\n' "$code" >"$logs/exit_code"
  say "tutorial: the job ended with exit code $code; the panes stay for the room to read."
  say "tutorial: press Enter here to end the session (or: tmux kill-session -t $session)"
  read -r _ || true
  tmux kill-session -t "=$session"
}
