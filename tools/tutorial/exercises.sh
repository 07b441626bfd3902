# shellcheck shell=bash
# tools/tutorial/exercises.sh — ./tutorial check and ./tutorial reset: grading and restoring the
# exercises.
#
# Sourced by ./tutorial. The grading itself is tools/grader/check.py; this file picks the
# exercises a command names, builds, and restores a starter from git. Tested by
# tests/tutorial/tutorial_test.sh (reset) and tests/tutorial/grader_test.py (check).

# ---- Exercises ------------------------------------------------------------------------------
# The exercises are the lesson table's rows NN-exK. The participant edits the starter,
# chapters/NN_name/exercises/exK_*.cpp, which builds the row's program; its reference solution,
# chapters/NN_name/solutions/ (same file name), builds PROGRAM_solution. The grader,
# chapters/NN_name/exercises/grader.py, runs through tools/grader/check.py, which also builds each
# exercise's program on its own (a compile error is that exercise's FAIL, not the end of the
# check). `reset` keeps the participant's version in KEPT_DIR, outside build/.
KEPT_DIR=exercises-kept
exercises_matching() { # exercises_matching [NN | NN-exK]...: the exercise rows meant, in table order
  local want i found
  [ $# -gt 0 ] || set -- all
  for want in "$@"; do
    [[ $want =~ ^(all|[0-9][0-9]|[0-9][0-9]-ex[0-9]+)$ ]] ||
      die "'$want' is neither a chapter (NN) nor an exercise (NN-exK); ./tutorial list shows them"
    found=0
    for i in "${!L_NAME[@]}"; do
      [[ ${L_NAME[i]} =~ ^([0-9][0-9])-ex[0-9]+$ ]] || continue
      if [ "$want" = all ] || [ "$want" = "${L_NAME[i]}" ] || [ "$want" = "${BASH_REMATCH[1]}" ]; then
        printf '%s\n' "${L_NAME[i]}"
        found=1
      fi
    done
    [ $found -eq 1 ] || die "no exercise called '$want'; ./tutorial list shows them"
  done
}

starter_of() { # starter_of NN-exK: the starter's path (chapters/NN_name/exercises/exK_*.cpp)
  local chapter=${1%%-*} short=${1#*-} found
  found=$(compgen -G "chapters/${chapter}_*/exercises/${short}_*.cpp" || true)
  [ -n "$found" ] && [ "$(wc -l <<<"$found")" -eq 1 ] ||
    die "exercise $1 has no starter chapters/${chapter}_*/exercises/${short}_*.cpp"
  printf '%s\n' "$found"
}

cmd_check() {
  local names=() matching
  matching=$(exercises_matching "$@") || exit 2
  mapfile -t names <<<"$matching"
  ensure_packages "${BUILD_PACKAGES[@]}" python3
  build cpu ddprun >&2
  show_and_run /usr/bin/python3 tools/grader/check.py build/cpu/bin --build build/cpu "${names[@]}"
}

cmd_reset() {
  [ $# -eq 1 ] && [[ $1 =~ ^[0-9][0-9]-ex[0-9]+$ ]] || die "reset takes one exercise, NN-exK (./tutorial list shows them)"
  lesson_index "$1" >/dev/null || die "no exercise called '$1'; ./tutorial list shows them"
  local starter kept
  starter=$(starter_of "$1")
  command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    die "reset needs the repository's git history to restore $starter, and this is not a git checkout"
  git ls-files --error-unmatch -- "$starter" >/dev/null 2>&1 ||
    die "$starter is not in the repository's git history, so there is no starter to restore"
  if git diff --quiet HEAD -- "$starter"; then
    say "tutorial: $starter is already the starter; nothing to keep"
    return 0
  fi
  kept=$KEPT_DIR/$(date +%Y%m%d-%H%M%S)-$(basename "$starter")
  mkdir -p "$(dirname "$kept")"
  cp -- "$starter" "$kept"
  show_and_run git checkout HEAD -- "$starter"
  say "tutorial: $starter is the starter again; your version is kept in $kept ($KEPT_DIR/ is outside build/, and git ignores it)"
}
