# shellcheck shell=bash
# tools/tutorial/doctor.sh — ./tutorial doctor and ./tutorial doctor --workshop.
#
# Sourced by ./tutorial. `doctor` lists what is installed, whether a GPU is usable, and the
# backend each lesson will use, asked of the library itself (tools/backend_probe). `doctor
# --workshop` says in seconds whether this machine can run every lesson and exercise, and what to
# do first if not. Uses the package lists and distribution helpers of setup.sh and the lesson
# table of lessons.sh. Tested by tests/tutorial/tutorial_test.sh and setup_test.sh.

# ./tutorial doctor --workshop: can this machine run every lesson and exercise? Seconds, not
# minutes: it builds and runs nothing. It checks the distribution, the packages the build and the
# lessons need, the compiler's and CMake's versions, whether the tree is built (or about how long
# the first build takes), loopback TCP, the cores, the free disk, and root for `multinode`.
# Exit 0: ready (maybe with notes); 1: not yet, with what to do first.
BUILD_CORE_SECONDS=420 # the cpu preset's full build from nothing, in CPU seconds (.ninja_log of a fresh root)
BUILD_FREE_MB=3000     # the build tree and the packages, with room to spare
cmd_doctor_workshop() {
  local distro problems=() row_ok="✓" row_bad="✗" row_note="·"
  distro=$(distro)
  row() { printf '  %s %-10s %s\n' "$1" "$2" "$3" >&2; }
  say "Workshop check: can this machine run every lesson and exercise? ($(distro_name))"

  case $distro in
    debian12) row "$row_ok" system "Debian 12: every lesson, exercise and test runs here" ;;
    ubuntu* | fedora) row "$row_note" system "$(distro_name): the lessons and exercises build here as on Debian 12 (untested by the project); the test suite and the slides need Debian 12 or the container" ;;
    *)
      row "$row_bad" system "$(distro_name): not a distribution the tutorial knows"
      problems+=("use the container (Dockerfile, .devcontainer/) or a Debian 12 machine")
      ;;
  esac

  local needs missing=() note
  mapfile -t needs < <(lesson_needs "${!L_NAME[@]}")
  if [ "$distro" != other ]; then
    mapfile -t missing < <(missing_packages "$distro" "${BUILD_PACKAGES[@]}" "${needs[@]}")
    if [ ${#missing[@]} -eq 0 ]; then
      row "$row_ok" packages "the build's and the lessons' are installed"
    else
      row "$row_bad" packages "missing: ${missing[*]}"
      problems+=("$(install_command "$distro" "${missing[@]}")")
    fi
    while IFS= read -r note; do
      [ -z "$note" ] || problems+=("$note")
    done < <(distro_notes "$distro")
  fi

  local version
  if command -v g++ >/dev/null 2>&1; then
    version=$(g++ -dumpfullversion 2>/dev/null || g++ -dumpversion)
    if version_at_least "$version" 12; then
      row "$row_ok" compiler "g++ $version (C++20)"
    else
      row "$row_bad" compiler "g++ $version: the project is built with g++ 12 or newer"
      problems+=("install g++ 12 or newer")
    fi
  else
    row "$row_bad" compiler "no g++"
    [ ${#missing[@]} -gt 0 ] || problems+=("install g++ 12 or newer")
  fi
  if command -v cmake >/dev/null 2>&1; then
    version=$(cmake --version | sed -n '1s/^cmake version \([0-9.]*\).*/\1/p')
    if version_at_least "$version" 3.25; then
      row "$row_ok" cmake "cmake $version"
    else
      row "$row_bad" cmake "cmake $version: the presets need 3.25 or newer"
      problems+=("install CMake 3.25 or newer")
    fi
  else
    row "$row_bad" cmake "no cmake"
    [ ${#missing[@]} -gt 0 ] || problems+=("install CMake 3.25 or newer")
  fi

  local i program unbuilt=0 wanted=1 cores
  cores=$(nproc 2>/dev/null || echo 1)
  for i in "${!L_NAME[@]}"; do
    program=${L_PROGRAM[i]}
    case ${L_KIND[i]} in ddprun | driver) ;; *) continue ;; esac
    wanted=$((wanted + 1))
    [ -x "build/cpu/bin/$program" ] || unbuilt=$((unbuilt + 1))
    if [[ ${L_NAME[i]} =~ ^[0-9][0-9]-ex[0-9]+$ ]]; then
      wanted=$((wanted + 1))
      [ -x "build/cpu/bin/${program}_solution" ] || unbuilt=$((unbuilt + 1))
    fi
  done
  [ -x build/cpu/bin/ddprun ] || unbuilt=$((unbuilt + 1))
  if [ $unbuilt -eq 0 ]; then
    row "$row_ok" build "build/cpu holds every lesson's and exercise's program"
  else
    row "$row_note" build "not fully built ($unbuilt of $wanted programs missing): ./tutorial tour builds everything, about $(((BUILD_CORE_SECONDS / cores + 59) / 60)) min on $cores cores; do it before the workshop"
  fi

  if loopback_works; then
    row "$row_ok" loopback "TCP on 127.0.0.1 works, and localhost resolves"
  else
    row "$row_bad" loopback "no TCP on 127.0.0.1, or localhost does not resolve: every lesson's ranks meet there"
    problems+=("bring up loopback (ip link set lo up) and put '127.0.0.1 localhost' in /etc/hosts")
  fi
  if (exec 3<>/dev/tcp/127.0.0.1/29500) 2>/dev/null; then
    row "$row_note" port "something listens on 127.0.0.1:29500: the lessons pick a free port (--standalone), but by-hand ddprun commands without it use 29500"
  else
    row "$row_ok" port "29500 (ddprun's default master port) is free"
  fi

  local most=1 n
  for i in "${!L_NAME[@]}"; do
    n=$(ranks_per_machine "${L_RANKS[i]}") && [ "$n" -gt "$most" ] && most=$n
  done
  if [ "$cores" -ge "$most" ]; then
    row "$row_ok" cores "$cores: a core for each rank of the largest lesson ($most ranks)"
  else
    row "$row_note" cores "$cores for lessons of up to $most ranks: they share cores, and run (slower)"
  fi

  local free_mb
  free_mb=$(df -Pm . | awk 'NR == 2 { print $4 }')
  if [ "${free_mb:-0}" -ge "$BUILD_FREE_MB" ] || [ $unbuilt -eq 0 ]; then
    row "$row_ok" disk "${free_mb} MB free here"
  else
    row "$row_bad" disk "${free_mb} MB free here; the build and its packages want about $BUILD_FREE_MB MB"
    problems+=("free about $BUILD_FREE_MB MB of disk")
  fi

  if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    row "$row_ok" git "a git checkout: ./tutorial reset NN-exK can restore a starter"
  else
    row "$row_note" git "not a git checkout (or no git): ./tutorial reset cannot restore a starter; clone the repository with git"
  fi

  if [ "$(user_id)" -eq 0 ]; then
    row "$row_ok" root "yes: multinode (two machines as network namespaces) can run"
  else
    row "$row_note" root "no: multinode needs root (sudo ./tutorial run multinode); every other lesson and exercise runs as you"
  fi

  say ""
  if [ ${#problems[@]} -eq 0 ]; then
    say "READY: this machine can run every lesson and exercise."
    return 0
  fi
  say "NOT READY: do this first, then run ./tutorial doctor --workshop again:"
  printf '  %s\n' "${problems[@]}" >&2
  return 1
}

version_at_least() { # version_at_least VERSION MINIMUM: dotted numbers
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

# TCP from 127.0.0.1 to itself (with Python where it is installed), and localhost resolving.
loopback_works() {
  getent hosts localhost >/dev/null 2>&1 || return 1
  if [ -x /usr/bin/python3 ]; then
    timeout 10 /usr/bin/python3 -c '
import socket
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname(), timeout=5)
peer, _ = server.accept()
client.sendall(b"ok")
assert peer.recv(2) == b"ok"' >/dev/null 2>&1
  else
    [ -r /sys/class/net/lo/flags ] && (($(cat /sys/class/net/lo/flags) & 1))
  fi
}

cmd_doctor() {
  if [ "${1:-}" = --workshop ] && [ $# -eq 1 ]; then
    cmd_doctor_workshop
    return
  fi
  [ $# -eq 0 ] || die "unknown option '$1' for doctor (use --workshop)"
  local pkg status
  say "Debian packages:"
  for pkg in "${TEST_PACKAGES[@]}"; do
    if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      status="✓ $(dpkg-query -W -f='${Version}' "$pkg")"
    else
      status="✗ missing: apt-get install $pkg"
    fi
    printf '  %-16s %s\n' "$pkg" "$status" >&2
  done
  say "Slides (Marp from npm, pinned by slides/package-lock.json):"
  if command -v node >/dev/null 2>&1; then
    say "  ✓ node $(node --version), npm $(npm --version 2>/dev/null || echo missing)"
  else
    say "  ✗ node is missing: apt-get install nodejs npm"
  fi
  if [ -f slides/node_modules/@marp-team/marp-cli/package.json ]; then
    say "  ✓ marp-cli $(sed -n 's/^  \"version\": \"\(.*\)\",$/\1/p' slides/node_modules/@marp-team/marp-cli/package.json)"
  else
    say "  ✗ marp-cli is not installed: npm ci --prefix slides (./tutorial slides does it)"
  fi
  say "CUDA toolkit:"
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    say "  ✓ $(/usr/local/cuda/bin/nvcc --version | tail -n 2 | head -n 1)"
    if [ -e /usr/local/cuda/include/nccl.h ]; then say "  ✓ NCCL headers in /usr/local/cuda/include"; fi
  else
    say "  ✗ not found in /usr/local/cuda (needed only for the cuda preset)"
  fi
  say "GPU:"
  if [ -x build/cuda/bin/gpu_probe ]; then
    build/cuda/bin/gpu_probe 2>&1 | sed 's/^/  /' >&2 || true
  elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi -L | sed 's/^/  /' >&2
    say "  (build the cuda preset to check that kernels run: cmake --workflow --preset cuda)"
  else
    say "  ✗ no usable GPU (no NVIDIA driver or device): the lessons run on Gloo, on the CPU"
  fi
  # The backend column is the library's own choice (tools/backend_probe), for the most ranks each
  # lesson starts on one machine; the cuda build's answer when there is one: it has the GPU path.
  local probe
  if [ -x build/cuda/bin/backend_probe ]; then
    probe=build/cuda/bin/backend_probe
  elif [ -x build/cpu/bin/backend_probe ]; then
    probe=build/cpu/bin/backend_probe
  else
    say "Backend each lesson will use with --backend auto: build first (./tutorial tour, or"
    say "  cmake --workflow --preset cuda), then the library answers here"
    return 0
  fi
  local i n counts=()
  for i in "${!L_NAME[@]}"; do
    n=$(ranks_per_machine "${L_RANKS[i]}") ||
      die "$LESSONS_FILE: lesson ${L_NAME[i]} has ranks '${L_RANKS[i]}' (want N, N,M or MxN)"
    counts+=("$n")
  done
  local sizes answer why
  local -A backend=() reason=()
  sizes=$(printf '%s\n' "${counts[@]}" | sort -un)
  while IFS=$'\t' read -r n answer why; do
    backend[$n]=$answer reason[$n]=$why
  done < <("$probe" $sizes)
  say "Backend each lesson will use with --backend auto (the library's choice, asked of $probe):"
  printf '  %-12s %-6s %-12s %s\n' LESSON RANKS PER-MACHINE BACKEND >&2
  for i in "${!L_NAME[@]}"; do
    printf '  %-12s %-6s %-12s %s\n' "${L_NAME[i]}" "${L_RANKS[i]}" "${counts[i]}" \
      "${backend[${counts[i]}]:-?}" >&2
  done
  local distinct
  for n in $sizes; do reason[$n]="${backend[$n]:-?}: ${reason[$n]:-no answer from $probe}"; done
  distinct=$(for n in $sizes; do printf '%s\n' "${reason[$n]}"; done | sort -u)
  if [ "$(wc -l <<<"$distinct")" -eq 1 ]; then
    say "  why, for every lesson: $distinct"
  else
    for n in $sizes; do say "  why, with $n ranks on this machine: ${reason[$n]}"; done
  fi
}
