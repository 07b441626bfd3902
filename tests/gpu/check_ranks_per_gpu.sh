#!/usr/bin/env bash
# Real ranks on real GPUs, through ddprun and the smoke program (label gpu).
#   With N usable GPUs: N ranks with --backend nccl all-reduce on their GPUs (device='cuda:R');
#   N+1 ranks with --backend nccl stop with exit 2, saying NCCL cannot put two ranks on one GPU;
#   --backend auto picks nccl for N ranks and gloo for N+1, and says why.
# Usage: check_ranks_per_gpu.sh BIN_DIR   (exits 77 when this machine has no usable GPU)
set -u
bin=${1:?usage: check_ranks_per_gpu.sh BIN_DIR}
failures=0

probe=$("$bin/gpu_probe")
rc=$?
if [ $rc -eq 77 ]; then
  echo "skipped: $probe"
  exit 77
fi
if [ $rc -ne 0 ]; then
  echo "$probe"
  echo "FAIL: gpu_probe exited $rc"
  exit 1
fi
gpus=$(sed -n 's/^gpu_probe: \([0-9]*\) of [0-9]* devices usable$/\1/p' <<<"$probe")
echo "$probe"

# run NPROC BACKEND: runs smoke under ddprun (60 s at most) and leaves its output in $out.
run() {
  out=$(timeout 60 "$bin/ddprun" --standalone --nproc-per-node "$1" "$bin/smoke" --backend "$2" 2>&1)
  code=$?
}

# expect WHAT CODE TEXT...: the last run exited CODE and printed every TEXT.
expect() {
  local what=$1 want=$2
  shift 2
  local ok=1
  [ "$code" -eq "$want" ] || ok=0
  for text in "$@"; do grep -qF -- "$text" <<<"$out" || ok=0; done
  if [ $ok -eq 1 ]; then
    echo "ok: $what"
  else
    echo "FAIL: $what (exit $code, wanted $want; wanted lines: $*)"
    echo "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}

run "$gpus" nccl
last=$((gpus - 1))
expect "$gpus rank(s) on $gpus GPU(s) with nccl" 0 \
  "[rank $last/$gpus] after all_reduce:" "device='cuda:$last')" "OK: every rank holds the closed-form sum"

run $((gpus + 1)) nccl
expect "$((gpus + 1)) ranks on $gpus GPU(s) with nccl are refused" 2 \
  "backend nccl cannot run on rank" "NCCL cannot put two ranks on one GPU" \
  "ddprun --nproc-per-node $gpus"

run "$gpus" auto
expect "auto with one GPU per rank picks nccl" 0 \
  "backend auto chose nccl: every rank has a GPU of its own" "device='cuda:0')"

run $((gpus + 1)) auto
expect "auto with more ranks than GPUs picks gloo" 0 \
  "backend auto chose gloo: rank 0 (and $gpus other" "NCCL cannot put two ranks on one GPU" \
  "OK: every rank holds the closed-form sum"

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
