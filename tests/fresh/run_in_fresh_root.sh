#!/usr/bin/env bash
# The fresh-machine promise, checked: `./tutorial tour` on a pristine Debian 12, as a new user
# would run it. It makes a Debian 12 root with nothing else installed (debootstrap
# --variant=minbase bookworm), copies a clean export of this repository into it (git archive
# HEAD: what is committed, nothing built), and runs the command there with chroot, as root, with
# the host's DNS settings and nothing else from the host. Exit code: the command's (0 when the
# tour ended OK), 2 for bad usage, 77 when this machine cannot do it (not root, no debootstrap).
#
#   tests/fresh/run_in_fresh_root.sh [--keep] [--work DIR] [--mirror URL] [-- COMMAND...]
#
#   --keep        leave the root in place afterwards (default: removed)
#   --work DIR    where the root and the log go (default: a new folder in /var/tmp; ~3 GB)
#   --mirror URL  the Debian mirror (default: the first of this machine's apt sources)
#   COMMAND       what to run in the repository inside the root (default: ./tutorial tour)
#
# It takes many minutes (every package is downloaded, then everything is built), so no preset runs
# it; tests/fresh/README.md says when to. Every step has a deadline, and /proc, /sys and /dev are
# unmounted on the way out, also after a failure or Ctrl-C.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SUITE=bookworm
DEBOOTSTRAP_S=1800 # making the root: ~100 packages from the mirror
COMMAND_S=5400     # the tour: the build packages, a full build on a small machine, every lesson

exec 3>&2 # the script's own lines go here, also while a step's output goes to a log
say() { printf 'fresh: %s\n' "$*" >&3; }
usage() {
  sed -n '2,/^set -euo/s/^# \{0,1\}//p' "$0" >&2
  exit 2
}

keep=0 work="" mirror="" command=(./tutorial tour)
while [ $# -gt 0 ]; do
  case $1 in
    --keep) keep=1 && shift ;;
    --work) [ $# -ge 2 ] || usage && work=$2 && shift 2 ;;
    --mirror) [ $# -ge 2 ] || usage && mirror=$2 && shift 2 ;;
    --) shift && [ $# -gt 0 ] && command=("$@") && break ;;
    -h | --help) usage ;;
    *) say "unknown argument '$1'" && usage ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  say "skipped: making a root and chroot-ing into it needs root; run it with sudo"
  exit 77
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap (Debian's, with apt-get)"
  timeout 600 apt-get install -y -q --no-install-recommends debootstrap >&2 ||
    { say "skipped: debootstrap is missing and could not be installed" && exit 77; }
fi
if [ -z "$mirror" ]; then # deb822 (URIs: ...) or one-line (deb URL suite ...) sources
  mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    sed -n -e 's/^URIs: *\([^ ]*debian\/*\)$/\1/p' -e 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*debian\/*\) .*/\2/p' |
    head -n 1) || true
  mirror=${mirror:-http://deb.debian.org/debian}
fi
if ! git -C "$REPO" diff --quiet HEAD; then
  say "note: uncommitted changes are not in the export (git archive HEAD)"
fi

work=${work:-$(mktemp -d /var/tmp/dist-fresh.XXXXXX)}
root=$work/root
log=$work/command.log
mkdir -p "$root"

# Unmounts everything under the root, deepest first (the tour's network namespaces included),
# then removes the root unless --keep.
under_root() { awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts; }
cleanup() {
  local mounts
  mapfile -t mounts < <(under_root | sort -r)
  if [ ${#mounts[@]} -gt 0 ]; then
    umount "${mounts[@]}" 2>/dev/null || umount -l "${mounts[@]}" 2>/dev/null || true
  fi
  if [ "$keep" = 1 ]; then
    say "the root stays in $root (--keep); the log is $log"
  elif [ -n "$(under_root)" ]; then
    say "something is still mounted under $root: not removing it"
  else
    rm -rf "$root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'say "stopped: line $LINENO failed: $BASH_COMMAND"' ERR

step() { # step SECONDS WHAT COMMAND...: runs COMMAND with a deadline, timed
  local seconds=$1 what=$2 start=$SECONDS rc=0
  shift 2
  say "$what (at most $seconds s): $*"
  timeout --kill-after=30 "$seconds" "$@" || rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "$what: no end within $seconds s"
  fi
  say "$what: exit $rc after $((SECONDS - start)) s"
  return $rc
}

started=$SECONDS
step "$DEBOOTSTRAP_S" "making a pristine Debian 12 root" \
  debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { say "debootstrap failed; see $work/debootstrap.log" && exit 1; }
mkdir -p "$root/root/dist-tutorial"
step 120 "exporting the repository" \
  bash -c 'git -C "$1" archive HEAD | tar -x -C "$2"' _ "$REPO" "$root/root/dist-tutorial"
cp /etc/resolv.conf "$root/etc/resolv.conf" # to reach the mirror by name, as any machine can
# The root is made a mount point, as a machine's / is: `ip netns` (the multinode lesson) changes
# the propagation of /, which only a mount point has.
mount --bind "$root" "$root"
mount --make-private "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"

rc=0
step "$COMMAND_S" "running ${command[*]} in the root" \
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c 'cd /root/dist-tutorial && exec "$@"' _ "${command[@]}" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
say "${command[*]}: exit $rc; $((SECONDS - started)) s in all; the log is $log"
if [ "$rc" -eq 0 ]; then
  say "OK: ${command[*]} ended well on a pristine Debian 12"
else
  say "FAILED: ${command[*]} exited $rc; see $log"
fi
exit "$rc"
