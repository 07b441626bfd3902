#!/usr/bin/env bash
# A chapter on real GPUs: ddprun starts one rank per usable GPU (2 at most) with --backend nccl;
# the chapter must exit 0 and print its OK line. Exits 77 (skipped) without a usable GPU.
# Usage: check_chapter_on_gpus.sh BIN_DIR PROGRAM [ARGS...]
set -u
bin=${1:?usage: check_chapter_on_gpus.sh BIN_DIR PROGRAM [ARGS...]}
program=${2:?usage: check_chapter_on_gpus.sh BIN_DIR PROGRAM [ARGS...]}
shift 2
probe=$("$bin/gpu_probe")
rc=$?
if [ $rc -eq 77 ]; then
  echo "skipped: $probe"
  exit 77
fi
gpus=$(sed -n 's/^gpu_probe: \([0-9]*\) of [0-9]* devices usable$/\1/p' <<<"$probe")
if [ $rc -ne 0 ] || [ -z "$gpus" ]; then
  echo "FAIL: gpu_probe exited $rc: $probe"
  exit 1
fi
nproc=$((gpus < 2 ? gpus : 2))
out=$(timeout 300 "$bin/ddprun" --standalone --nproc-per-node "$nproc" "$bin/$program" --backend nccl "$@" 2>&1)
code=$?
echo "$out"
if [ $code -ne 0 ] || ! grep -q "^\[rank 0/$nproc\] OK" <<<"$out"; then
  echo "FAIL: $program on $nproc GPU(s) exited $code"
  exit 1
fi
echo "ok: $program on $nproc GPU(s) with NCCL"
