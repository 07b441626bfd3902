#!/usr/bin/env bash
# ./tutorial on machines other than this one, played with fake /etc/os-release files and a fake
# user id: which distribution it recognises, the one install line it prints for each, that a user
# who is not root gets that line and nothing is installed, and the verdicts of
# `./tutorial doctor --workshop` on machines that lack something. Builds and installs nothing.
#
#   setup_test.sh REPO_ROOT
set -euo pipefail
root=$1
scratch=$(mktemp -d)
chmod 755 "$scratch" # the unprivileged user below reads its fake os-release
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# shellcheck source=/dev/null
source "$root/tutorial" # defines its functions; main runs only when it is executed
load_lessons
set +e # each case below checks its exit code itself
real_missing_packages=$(declare -f missing_packages)

fake_os() { # fake_os NAME: an os-release file like that distribution's
  local file=$scratch/os-release-$1
  case $1 in
    debian12) printf 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n' ;;
    debian13) printf 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\nVERSION_ID="13"\n' ;;
    ubuntu2204) printf 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n' ;;
    ubuntu2404) printf "PRETTY_NAME='Ubuntu 24.04 LTS'\nID=ubuntu\nID_LIKE=debian\nVERSION_ID='24.04'\n" ;;
    fedora) printf 'NAME="Fedora Linux"\nPRETTY_NAME="Fedora Linux 43 (Workstation Edition)"\nID=fedora\nVERSION_ID=43\n' ;;
    arch) printf 'PRETTY_NAME="Arch Linux"\nID=arch\n' ;;
  esac >"$file"
  printf '%s\n' "$file"
}

# ---- Which distribution: from ID and VERSION_ID, quoted or not.
for case in "debian12 debian12" "debian13 other" "ubuntu2204 ubuntu22.04" "ubuntu2404 ubuntu24.04" \
  "fedora fedora" "arch other"; do
  read -r os want <<<"$case"
  got=$(OS_RELEASE=$(fake_os "$os") distro)
  [ "$got" = "$want" ] || fail "distro with $os's os-release = $got, want $want"
done
got=$(OS_RELEASE=$scratch/none distro)
[ "$got" = other ] || fail "distro without an os-release = $got, want other"
[ "$(OS_RELEASE=$(fake_os ubuntu2404) distro_name)" = "Ubuntu 24.04 LTS" ] || fail "distro_name ignored single quotes"
echo "ok    distro: Debian 12, Ubuntu 22.04 and 24.04, Fedora, and the rest as other"

# ---- Not root: the one install line, for each distribution, and nothing installed.
user_id() { echo 65534; }
installed=$scratch/installed
apt-get() { echo "apt-get $*" >>"$installed"; }
dnf() { echo "dnf $*" >>"$installed"; }
rpm() { [ "$3" = cmake ]; } # rpm -q --quiet NAME: on the fake Fedora, only cmake is installed
expect_line() { # expect_line OS WANT_LINE [NOTE]: ensure_packages of two build packages
  local os=$1 want=$2 note=${3:-} out rc
  : >"$installed"
  out=$(OS_RELEASE=$(fake_os "$os") ensure_packages cmake libgloo-dev dist-tutorial-no-such-package zlib1g-dev dataset-fashion-mnist g++ iproute2 2>&1)
  rc=$?
  [ $rc -eq 2 ] || fail "$os, not root: ensure_packages exited $rc, want 2: $out"
  grep -qxF -- "  $want" <<<"$out" || fail "$os, not root: no line '  $want' in:"$'\n'"$out"
  [ "$(grep -c "^  sudo" <<<"$out")" -eq 1 ] || fail "$os, not root: want exactly one command to run:"$'\n'"$out"
  [ ! -s "$installed" ] || fail "$os, not root: it installed: $(cat "$installed")"
  [ -z "$note" ] || grep -qF -- "$note" <<<"$out" || fail "$os: no note '$note' in:"$'\n'"$out"
}
# On the Debian-like fakes the host's dpkg database answers (the made-up package is never there).
apt_missing=$(missing_packages debian12 cmake libgloo-dev dist-tutorial-no-such-package zlib1g-dev dataset-fashion-mnist g++ iproute2 | paste -sd ' ')
expect_line debian12 "sudo apt-get update && sudo apt-get install -y --no-install-recommends $apt_missing"
expect_line ubuntu2404 "sudo add-apt-repository -y universe && sudo apt-get update && sudo apt-get install -y --no-install-recommends $apt_missing"
expect_line ubuntu2204 "sudo add-apt-repository -y universe && sudo apt-get update && sudo apt-get install -y --no-install-recommends $apt_missing" \
  "Ubuntu 22.04's cmake is 3.22"
expect_line fedora "sudo dnf install -y gloo-devel dist-tutorial-no-such-package zlib-devel gcc-c++ iproute" \
  "Fedora has no package of Fashion-MNIST"
echo "ok    not root: one install line per distribution (apt-get, universe + apt-get, dnf), nothing installed"

# Elsewhere it cannot know the names: it says so and goes on; so do the Debian-only package sets.
out=$(OS_RELEASE=$(fake_os arch) ensure_packages libgloo-dev 2>&1) || fail "arch: ensure_packages stopped: $out"
grep -q "Arch Linux is not Debian 12, so these packages are not checked: libgloo-dev" <<<"$out" || fail "arch: $out"
out=$(OS_RELEASE=$(fake_os fedora) ensure_packages --debian-only python3-torch 2>&1) || fail "fedora, --debian-only stopped: $out"
grep -q "not checked: python3-torch" <<<"$out" || fail "fedora, --debian-only: $out"
echo "ok    other distributions and Debian-only packages: a note, and it goes on"

# ---- Root on Debian 12: installs exactly the missing ones, with apt-get.
user_id() { echo 0; }
: >"$installed"
out=$(OS_RELEASE=$(fake_os debian12) ensure_packages cmake dist-tutorial-no-such-package 2>&1) || fail "root: $out"
want="apt-get update -q"$'\n'"apt-get install -y -q --no-install-recommends dist-tutorial-no-such-package"
[ "$(cat "$installed")" = "$want" ] || fail "root on Debian 12 ran:"$'\n'"$(cat "$installed")"$'\n'"want:"$'\n'"$want"
: >"$installed"
out=$(OS_RELEASE=$(fake_os ubuntu2404) ensure_packages dist-tutorial-no-such-package 2>&1)
[ $? -eq 2 ] && [ ! -s "$installed" ] || fail "root on Ubuntu installed or went on: $out"
grep -qxF "  add-apt-repository -y universe && apt-get update && apt-get install -y --no-install-recommends dist-tutorial-no-such-package" <<<"$out" ||
  fail "root on Ubuntu: the line should have no sudo: $out"
echo "ok    root: Debian 12 installs the missing packages; Ubuntu (untested here) gets the line without sudo"

# ---- ./tutorial test as a user on a bare machine: one line for everything, then nothing else runs.
user_id() { echo 65534; }
missing_packages() { shift && printf '%s\n' "$@"; } # a bare machine: every package is missing
cmake() { echo "cmake $*" >>"$installed"; }
npm() { echo "npm $*" >>"$installed"; }
: >"$installed"
out=$(OS_RELEASE=$(fake_os debian12) cmd_test 2>&1)
[ $? -eq 2 ] || fail "test on a bare machine went on: $out"
[ "$(grep -c 'sudo apt-get' <<<"$out")" -eq 1 ] || fail "test on a bare machine: want one install line: $out"
for pkg in libgtest-dev libgloo-dev python3-torch chromium fonts-dejavu-core; do
  grep 'sudo apt-get' <<<"$out" | grep -qw -- "$pkg" || fail "test's install line lacks $pkg: $out"
done
[ ! -s "$installed" ] || fail "test on a bare machine ran: $(cat "$installed")"
line=$(grep 'sudo apt-get install' <<<"$out" | sed 's/.*--no-install-recommends //')
[ "$(tr ' ' '\n' <<<"$line" | sort | uniq -d)" = "" ] || fail "test's install line names a package twice: $line"
echo "ok    test as a user on a bare machine: one install line (the slides' packages in it), nothing run"
unset -f cmake npm
eval "$real_missing_packages"

# ---- A real unprivileged user (uid 65534), with the real id -u.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1 && setpriv --reuid 65534 --regid 65534 --clear-groups test -r "$root/tutorial"; then
  out=$(setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$scratch" \
    bash -c 'source "$1" && OS_RELEASE=$2 ensure_packages dist-tutorial-no-such-package' _ "$root/tutorial" "$(fake_os debian12)" 2>&1)
  rc=$?
  [ $rc -eq 2 ] || fail "as uid 65534: ensure_packages exited $rc: $out"
  grep -qxF "  sudo apt-get update && sudo apt-get install -y --no-install-recommends dist-tutorial-no-such-package" <<<"$out" ||
    fail "as uid 65534: $out"
  echo "ok    as uid 65534: the install line, exit 2"
else
  echo "ok    (not root here, or no setpriv: the real unprivileged user is not tried)"
fi

# ---- doctor --workshop: its verdicts, with the machine's parts faked one at a time.
workshop() { # workshop OS: the report, and "rc=N" last
  local out rc
  out=$(OS_RELEASE=$(fake_os "$1") cmd_doctor_workshop 2>&1)
  rc=$?
  printf '%s\nrc=%s\n' "$out" "$rc"
}
missing_packages() { :; }      # everything installed
loopback_works() { return 0; } # loopback fine
started=$SECONDS
out=$(workshop debian12)
grep -qx "rc=0" <<<"$out" && grep -q "^READY" <<<"$out" || fail "doctor --workshop on a good Debian 12 is not READY:"$'\n'"$out"
grep -q "multinode needs root" <<<"$out" || fail "doctor --workshop as a user does not say multinode needs root:"$'\n'"$out"
[ $((SECONDS - started)) -lt 60 ] || fail "doctor --workshop took $((SECONDS - started)) s; it should take seconds"

missing_packages() { [ "$1" = fedora ] && echo gloo-devel || echo libgloo-dev; }
out=$(workshop debian12)
grep -qx "rc=1" <<<"$out" && grep -q "^NOT READY" <<<"$out" || fail "doctor --workshop without gloo is READY:"$'\n'"$out"
grep -qxF "  sudo apt-get update && sudo apt-get install -y --no-install-recommends libgloo-dev" <<<"$out" ||
  fail "doctor --workshop without gloo does not say how to install it:"$'\n'"$out"
out=$(workshop fedora)
grep -qxF "  sudo dnf install -y gloo-devel" <<<"$out" && grep -q "Fashion-MNIST" <<<"$out" && grep -qx "rc=1" <<<"$out" ||
  fail "doctor --workshop on Fedora without gloo:"$'\n'"$out"
missing_packages() { :; }
out=$(workshop ubuntu2204)
grep -qx "rc=1" <<<"$out" && grep -q "snap install cmake" <<<"$out" || fail "doctor --workshop on Ubuntu 22.04 (cmake 3.22):"$'\n'"$out"
out=$(workshop arch)
grep -qx "rc=1" <<<"$out" && grep -q "use the container" <<<"$out" || fail "doctor --workshop on Arch:"$'\n'"$out"
loopback_works() { return 1; }
out=$(workshop debian12)
grep -qx "rc=1" <<<"$out" && grep -q "127.0.0.1 localhost" <<<"$out" || fail "doctor --workshop without loopback:"$'\n'"$out"
loopback_works() { return 0; }
g++() { echo 11.4.0; }
out=$(workshop debian12)
grep -qx "rc=1" <<<"$out" && grep -q "g++ 11.4.0: the project is built with g++ 12" <<<"$out" ||
  fail "doctor --workshop with g++ 11:"$'\n'"$out"
unset -f g++
echo "ok    doctor --workshop: READY on a good machine; NOT READY with the fix for missing packages (Debian, Fedora), Ubuntu 22.04's cmake, an unknown system, no loopback, g++ 11"

# The real check on this machine runs in seconds and ends with a verdict.
started=$SECONDS
out=$(cd "$root" && ./tutorial doctor --workshop 2>&1)
rc=$?
[ $((SECONDS - started)) -lt 60 ] || fail "doctor --workshop took $((SECONDS - started)) s here"
case $rc in 0) grep -q "^READY" <<<"$out" ;; 1) grep -q "^NOT READY" <<<"$out" ;; *) false ;; esac ||
  fail "doctor --workshop here exited $rc:"$'\n'"$out"
echo "ok    doctor --workshop here: $(tail -n 1 <<<"$out" | cut -c1-60)... in $((SECONDS - started)) s"
