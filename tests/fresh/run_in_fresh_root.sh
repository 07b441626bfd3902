#!/usr/bin/env bash
# The fresh-machine promise, checked: the quick start's two commands, `./tutorial tour` then
# `./tutorial test`, on a pristine Debian 12, as a new user would run them. It makes a Debian 12
# root with nothing else installed (debootstrap --variant=minbase bookworm), copies a clean export
# of this repository into it (git archive HEAD: what is committed, nothing built), gives it the
# network settings a new machine on this network would get (below), and runs the commands there
# one after the other with chroot, as root: the second reuses what the first installed and built,
# as on a participant's machine. Exit code: the first failing command's (0 when all ended OK), 2
# for bad usage, 77 when this machine cannot do it (not root, no mounts, no debootstrap).
#
#   tests/fresh/run_in_fresh_root.sh [--keep] [--work DIR] [--mirror URL] [--cache DIR]
#                                    [--no-cache] [-- COMMAND...]
#
#   --keep        leave the root in place afterwards (default: removed)
#   --work DIR    where the root and the logs go (default: a new folder in /var/tmp; ~6 GB)
#   --mirror URL  the Debian mirror (default: the first of this machine's apt sources)
#   --cache DIR   where debootstrap's root and the downloaded .deb files are kept between runs
#                 (default: /var/cache/dist-tutorial-fresh, outside the checkout, so that CI's
#                 fresh clones share it)
#   --no-cache    neither reuse nor keep them: debootstrap and download everything
#   COMMAND       one command to run instead of the two (e.g. -- ./tutorial tour)
#
# The network settings copied from this machine: /etc/hosts with localhost (debootstrap writes
# none), /etc/resolv.conf, the CA certificates added to this machine's trust store
# (/usr/local/share/ca-certificates: the Debian package ca-certificates, once a command installs
# it, adds them to the bundle), apt's proxy and CA settings (/etc/apt/apt.conf.d), npm's (proxy,
# https-proxy, noproxy, cafile, strict-ssl, registry, into /root/.npmrc), and the variables
# http_proxy, https_proxy, no_proxy and NODE_EXTRA_CA_CERTS. Without the CA certificates, npm ci
# fails with SELF_SIGNED_CERT_IN_CHAIN on a network that inspects TLS.
#
# Kept between runs (--cache): debootstrap's result, unpacked again by the runs of the next 7 days,
# and apt's downloaded packages, lent to the root's /var/cache/apt/archives as an apt cache on the
# network would be (apt checks each against the index it has just fetched). Every run still starts
# from a root in which nothing has run, and installs every package itself. It takes
# many minutes, so only the fresh preset (ctest --preset fresh), `./tutorial test --fresh` and CI
# run it. Every step has a deadline, and /proc, /sys and /dev are unmounted on the way out, also
# after a failure or Ctrl-C.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SUITE=bookworm
CACHE=/var/cache/dist-tutorial-fresh
CACHE_DAYS=7
DEBOOTSTRAP_S=1800 # making the root: ~100 packages from the mirror
COMMAND_S=5400     # one command: its packages, a full build on a small machine, its runs

exec 3>&2 # the script's own lines go here, also while a step's output goes to a log
say() { printf 'fresh: %s\n' "$*" >&3; }
usage() {
  sed -n '2,/^set -euo/s/^# \{0,1\}//p' "$0" >&2
  exit 2
}

keep=0 work="" mirror="" cache=1 commands=("./tutorial tour" "./tutorial test")
while [ $# -gt 0 ]; do
  case $1 in
    --keep) keep=1 && shift ;;
    --work) [ $# -ge 2 ] || usage && work=$2 && shift 2 ;;
    --mirror) [ $# -ge 2 ] || usage && mirror=$2 && shift 2 ;;
    --cache) [ $# -ge 2 ] || usage && CACHE=$2 && shift 2 ;;
    --no-cache) cache=0 && shift ;;
    --) shift && [ $# -gt 0 ] && commands=("$(printf '%q ' "$@")") && break ;;
    -h | --help) usage ;;
    *) say "unknown argument '$1'" && usage ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  say "skipped: making a root and chroot-ing into it needs root; run it with sudo"
  exit 77
fi
# A container's root may not mount (no CAP_SYS_ADMIN): find out now, not after the download.
probe=$(mktemp -d)
if ! mount --bind "$probe" "$probe" 2>/dev/null; then
  rmdir "$probe"
  say "skipped: this machine refuses mounts (a container without CAP_SYS_ADMIN?); the fresh root needs /proc, /sys and /dev mounted in it"
  exit 77
fi
umount "$probe" && rmdir "$probe"
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
    say "the root stays in $root (--keep); the logs are in $work"
  elif [ -n "$(under_root)" ]; then
    say "something is still mounted under $root: not removing it"
  else
    rm -rf "$root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'say "stopped: line $LINENO failed: $BASH_COMMAND"' ERR

# The CPU seconds (user + system) of this shell's finished children, into VAR (no subshell: one
# would have no children of its own). On a busy machine the wall time says little; the CPU time
# says what a step costs.
children_cpu() { # children_cpu VAR
  local user sys total=0 part
  times >"$work/times"
  { read -r _ && read -r user sys; } <"$work/times"
  for part in "$user" "$sys"; do # like 1m2.345s: whole seconds are enough
    [[ $part =~ ^([0-9]+)m([0-9]+) ]] && total=$((total + BASH_REMATCH[1] * 60 + 10#${BASH_REMATCH[2]}))
  done
  printf -v "$1" '%d' "$total"
}
step() { # step SECONDS WHAT COMMAND...: runs COMMAND with a deadline, timed
  local seconds=$1 what=$2 start=$SECONDS rc=0 cpu cpu_after
  shift 2
  say "$what (at most $seconds s): $*"
  children_cpu cpu
  timeout --kill-after=30 "$seconds" "$@" || rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "$what: no end within $seconds s"
  fi
  children_cpu cpu_after
  say "$what: exit $rc after $((SECONDS - start)) s ($((cpu_after - cpu)) CPU s)"
  return $rc
}

# A pristine root: debootstrap's, or the copy of it kept from a run in the last CACHE_DAYS days
# (same suite, same mirror, same architecture; nothing has ever run in it).
make_root() {
  local tarball=$CACHE/$SUITE-minbase.tar stamp=$CACHE/$SUITE-minbase.source
  local source
  source="$SUITE $mirror $(dpkg --print-architecture)"
  if [ "$cache" = 1 ] && [ -f "$tarball" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$source" ] &&
    [ -n "$(find "$tarball" -mtime -"$CACHE_DAYS" 2>/dev/null)" ]; then
    step 300 "unpacking the pristine Debian 12 root debootstrap made on $(date -r "$tarball" +%F)" \
      tar -x --numeric-owner --xattrs -p -f "$tarball" -C "$root"
    return
  fi
  step "$DEBOOTSTRAP_S" "making a pristine Debian 12 root" \
    debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { say "debootstrap failed; see $work/debootstrap.log" && exit 1; }
  if [ "$cache" = 1 ]; then
    mkdir -p "$CACHE"
    tar -c --numeric-owner --xattrs -f "$tarball.part" -C "$root" . && mv "$tarball.part" "$tarball" &&
      printf '%s\n' "$source" >"$stamp" && say "kept it as $tarball for the next $CACHE_DAYS days"
  fi
}

# What a new machine on this network gets from it (the header lists it).
give_network_settings() {
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  local added=(/usr/local/share/ca-certificates/*) file
  if [ -e "${added[0]}" ]; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp -a "${added[@]}" "$root/usr/local/share/ca-certificates/"
    say "CA certificates added on this machine, copied: ${added[*]##*/}"
  fi
  for file in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    if [ -f "$file" ] && grep -Eqi 'proxy|cainfo|capath|verify-peer|verify-host|sslcert|sslkey' "$file"; then
      cp "$file" "$root$file" && say "apt's network settings, copied: $file"
    fi
  done
  if command -v npm >/dev/null 2>&1; then
    local key value
    for key in proxy https-proxy noproxy cafile strict-ssl registry; do
      value=$(npm config get "$key" 2>/dev/null) || continue
      case $key=$value in
        *=null | *= | *=undefined | strict-ssl=true | registry=https://registry.npmjs.org/) ;;
        *) printf '%s=%s\n' "$key" "$value" >>"$root/root/.npmrc" ;;
      esac
    done
    [ ! -f "$root/root/.npmrc" ] || say "npm's network settings, copied: $(cut -d= -f1 "$root/root/.npmrc" | tr '\n' ' ')"
  fi
}

started=$SECONDS
make_root
mkdir -p "$root/root/dist-tutorial"
step 120 "exporting the repository" \
  bash -c 'git -C "$1" archive HEAD | tar -x -C "$2"' _ "$REPO" "$root/root/dist-tutorial"
give_network_settings
# The root is made a mount point, as a machine's / is: `ip netns` (the multinode lesson) changes
# the propagation of /, which only a mount point has.
mount --bind "$root" "$root"
mount --make-private "$root"
if [ "$cache" = 1 ]; then # the downloaded packages, older than 30 days dropped
  mkdir -p "$CACHE/apt-archives/partial"
  find "$CACHE/apt-archives" -maxdepth 1 -name '*.deb' -mtime +30 -delete
  mount --bind "$CACHE/apt-archives" "$root/var/cache/apt/archives"
fi
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"

environment=(HOME=/root LANG=C.UTF-8 TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY NODE_EXTRA_CA_CERTS; do
  [ -z "${!name:-}" ] || environment+=("$name=${!name}")
done

rc=0 n=0
for command in "${commands[@]}"; do
  n=$((n + 1))
  log=$work/command$n.log
  step "$COMMAND_S" "running $command in the root" \
    chroot "$root" /usr/bin/env -i "${environment[@]}" \
    bash -c 'cd /root/dist-tutorial && eval "$1"' _ "$command" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    say "FAILED: $command exited $rc on a pristine Debian 12; see $log ($((SECONDS - started)) s in all)"
    exit "$rc"
  fi
done
say "OK: $(printf '%s, then ' "${commands[@]}" | sed 's/, then $//') ended well on a pristine Debian 12; $((SECONDS - started)) s in all"
