# shellcheck shell=bash
# tools/tutorial/lessons.sh — the lesson table, chapters/lessons.txt, as ./tutorial reads it.
#
# Sourced by ./tutorial. load_lessons fills one array per column (L_NAME, L_PROGRAM, L_RANKS,
# L_KIND, L_NEEDS, L_SUMMARY; row i of the table is index i of each); lesson_index, lesson_needs
# and ranks_per_machine answer questions about its rows. Tested by tests/tutorial/tutorial_test.sh.

# The lessons, read from the lesson table (chapters/lessons.txt says what each column means).
LESSONS_FILE=chapters/lessons.txt
L_NAME=() L_PROGRAM=() L_RANKS=() L_KIND=() L_NEEDS=() L_SUMMARY=()

# ---- The lesson table -----------------------------------------------------------------------
load_lessons() {
  local name program ranks kind needs summary line=0 field
  while IFS='|' read -r name program ranks kind needs summary; do
    line=$((line + 1))
    [[ $name =~ ^[[:space:]]*(#|$) ]] && continue
    for field in name program ranks kind needs summary; do # trim the spaces around each field
      local -n value=$field
      value=${value#"${value%%[![:space:]]*}"}
      value=${value%"${value##*[![:space:]]}"}
      unset -n value
    done
    [ -n "$summary" ] || die "$LESSONS_FILE:$line: want six fields separated by '|' (lesson | program | ranks | kind | needs | summary)"
    L_NAME+=("$name") L_PROGRAM+=("$program") L_RANKS+=("$ranks") L_KIND+=("$kind")
    L_NEEDS+=("$needs") L_SUMMARY+=("$summary")
  done <"$LESSONS_FILE"
}

lesson_index() { # lesson_index NAME: the lesson's row, or fails
  local i
  for i in "${!L_NAME[@]}"; do
    [ "${L_NAME[i]}" = "$1" ] && printf '%s\n' "$i" && return 0
  done
  return 1
}

# The Debian packages the lessons in rows I... need beyond the build's, one a line.
lesson_needs() { # lesson_needs I...
  local i
  for i in "$@"; do
    [ "${L_NEEDS[i]}" = - ] || printf '%s\n' ${L_NEEDS[i]}
  done | sort -u
}

# The most ranks a lesson starts on one machine, from its ranks field: "2" is 2, "2,4" (cases on 2
# and on 4 ranks) is 4, "2x2" (2 machines of 2 ranks) is 2.
ranks_per_machine() { # ranks_per_machine RANKS
  local item most=0 IFS=,
  for item in $1; do
    [[ $item =~ ^([1-9][0-9]*x)?([1-9][0-9]*)$ ]] || return 1
    item=${BASH_REMATCH[2]}
    [ "$item" -gt "$most" ] && most=$item
  done
  [ "$most" -gt 0 ] && printf '%s\n' "$most"
}
