# shellcheck shell=bash
# tools/tutorial/setup.sh — what ./tutorial installs, and how it names it on each distribution.
#
# Sourced by ./tutorial (it runs nothing of its own). It holds the Debian package lists of the
# build, the tests, the slides, the benchmarks and the panes; the distribution, read from
# /etc/os-release; a Debian package's name on Ubuntu and Fedora; ensure_packages, which installs
# what is missing (Debian 12, as root) or prints the one command that does and stops; and the
# slides' packages (npm's too). Uses say and show_and_run from ./tutorial. Tested by
# tests/tutorial/setup_test.sh.

# Debian packages: what building needs (what a lesson needs beyond it is in its row of the lesson
# table), and what the tests add (GoogleTest, PyTorch as the reference implementation for parity
# tests, clang-format).
BUILD_PACKAGES=(g++ cmake ninja-build libgloo-dev zlib1g-dev dataset-fashion-mnist)
# The slides add Chromium (Marp renders PDFs with it; the tests check every slide in it) and the
# fonts the decks' theme names; Marp itself comes from npm, pinned by slides/package-lock.json.
SLIDES_PACKAGES=(chromium fonts-dejavu-core)
# The benchmarks add PyTorch (the other side of every comparison) and gnuplot (the plots).
# shellcheck disable=SC2034 # read by ./tutorial and doctor.sh
BENCH_PACKAGES=("${BUILD_PACKAGES[@]}" python3-torch python3-numpy gnuplot-nox)
# openmpi-bin and iproute2: the chapters under mpirun, and two machines as network namespaces.
# tmux: the live demo panes (run NN --panes), and the test that checks them.
PANES_PACKAGES=(tmux)
# shellcheck disable=SC2034 # read by ./tutorial and doctor.sh
TEST_PACKAGES=("${BUILD_PACKAGES[@]}" libgtest-dev python3-torch python3-numpy python3-torchvision clang-format clang libclang-rt-14-dev openmpi-bin iproute2 "${PANES_PACKAGES[@]}" "${SLIDES_PACKAGES[@]}")

# ---- Dependencies ---------------------------------------------------------------------------
# Debian 12 is where every test runs and where, as root, the tutorial installs what it needs. On
# Ubuntu 22.04 and 24.04 (libgloo-dev is in universe) and on Fedora (gloo-devel) it checks the
# build's and the lessons' packages under their names there and prints the one line that installs
# the missing ones; elsewhere it names Debian's packages and goes on. Read from /etc/os-release.
OS_RELEASE=/etc/os-release
os_release_field() { # os_release_field KEY: its value, quotes removed
  [ -r "$OS_RELEASE" ] || return 0
  sed -n "s/^$1=//p" "$OS_RELEASE" | head -n 1 | sed -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\1/"
}
distro() { # debian12, ubuntu22.04, ubuntu24.04, fedora or other
  local id version
  id=$(os_release_field ID) version=$(os_release_field VERSION_ID)
  case $id:$version in
    debian:12) echo debian12 ;;
    ubuntu:22.04 | ubuntu:24.04) echo "ubuntu$version" ;;
    fedora:*) echo fedora ;;
    *) echo other ;;
  esac
}
distro_name() { # the machine's name for itself
  local name
  name=$(os_release_field PRETTY_NAME)
  printf '%s\n' "${name:-an unknown Linux (no $OS_RELEASE)}"
}
user_id() { id -u; } # a function, so that the tests can play an unprivileged user

# A Debian package's name on DISTRO; nothing where it has no such package.
package_name() { # package_name DISTRO DEBIAN_NAME
  if [ "$1" = fedora ]; then
    case $2 in
      g++) echo gcc-c++ ;;
      libgloo-dev) echo gloo-devel ;;
      zlib1g-dev) echo zlib-devel ;;
      iproute2) echo iproute ;;
      dataset-fashion-mnist) ;; # not packaged: chapter 09 needs the container there
      *) echo "$2" ;;
    esac
  else
    echo "$2"
  fi
}

missing_packages() { # missing_packages DISTRO PKG...: those not installed, under DISTRO's names
  local distro=$1 pkg name
  shift
  for pkg in "$@"; do
    name=$(package_name "$distro" "$pkg")
    [ -n "$name" ] || continue
    if [ "$distro" = fedora ]; then
      rpm -q --quiet "$name" 2>/dev/null || printf '%s\n' "$name"
    elif ! dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed"; then
      printf '%s\n' "$name"
    fi
  done
}

# The one command that installs PKG... on DISTRO (empty for other distributions).
install_command() { # install_command DISTRO PKG...
  local distro=$1 sudo=""
  shift
  [ "$(user_id)" -eq 0 ] || sudo="sudo "
  case $distro in
    debian12) echo "${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends $*" ;;
    ubuntu*) echo "${sudo}add-apt-repository -y universe && ${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends $*" ;;
    fedora) echo "${sudo}dnf install -y $*" ;;
  esac
}

# What an install line cannot fix on DISTRO, one line each.
distro_notes() { # distro_notes DISTRO
  case $1 in
    ubuntu22.04) echo "Ubuntu 22.04's cmake is 3.22 and the build needs 3.25 or newer: sudo snap install cmake --classic (and its g++ 11 is untested; the project is built with g++ 12)" ;;
    fedora) echo "Fedora has no package of Fashion-MNIST, which chapter 09 reads from /usr/share/datasets/fashion-mnist: run chapter 09 and its exercises in the container (Dockerfile)" ;;
  esac
}

# Installs (Debian 12, as root) or names the one command that installs (otherwise) the packages
# PKG... (Debian's names) that are missing, and stops then: nothing is half-installed. With
# --debian-only (the tests', the slides' and the benchmarks' packages, which name Debian 12's
# PyTorch, Chromium and clang), other distributions only get a note that they are not checked.
ensure_packages() { # ensure_packages [--debian-only] PKG...
  local debian_only=0 distro missing command
  [ "${1:-}" != --debian-only ] || { debian_only=1 && shift; }
  distro=$(distro)
  if [ "$distro" = other ] || { [ "$debian_only" = 1 ] && [ "$distro" != debian12 ]; }; then
    say "tutorial: $(distro_name) is not Debian 12, so these packages are not checked: $*"
    say "  (Debian's names; install their equivalents, or use the container: see Dockerfile)"
    return 0
  fi
  mapfile -t missing < <(missing_packages "$distro" "$@")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$distro" = debian12 ] && [ "$(user_id)" -eq 0 ]; then
    say "tutorial: installing missing Debian packages: ${missing[*]}"
    show_and_run apt-get update -q
    DEBIAN_FRONTEND=noninteractive show_and_run apt-get install -y -q --no-install-recommends "${missing[@]}"
    return 0
  fi
  command=$(install_command "$distro" "${missing[@]}")
  say "tutorial: these packages are missing on $(distro_name): ${missing[*]}"
  say "Install them, then run this command again:"
  say "  $command"
  distro_notes "$distro" | sed 's/^/Note: /' >&2
  exit 2
}

# The slides' system packages: Chromium and the fonts, and Node.js and npm (Debian's) unless a
# Node is already installed.
slides_packages() {
  printf '%s\n' "${SLIDES_PACKAGES[@]}"
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    printf '%s\n' nodejs npm
  fi
}

# The slides' npm packages, exactly as slides/package-lock.json pins them (after slides_packages).
ensure_slides_npm() {
  if [ ! -f slides/node_modules/.package-lock.json ] ||
    [ slides/package-lock.json -nt slides/node_modules/.package-lock.json ]; then
    show_and_run npm ci --prefix slides --no-audit --no-fund
  fi
}
