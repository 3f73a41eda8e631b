#!/usr/bin/env bash
# The one call a session lent a GPU makes: set up, check, calibrate, validate, leave everything
# under $OUT (at most 8 files come back from the device tool, 2 folders deep):
#   calibration.json   the measured calibration (its checkpoint, calibration.json.partial.jsonl,
#                      stays beside it while it runs and when a budget cut the run short)
#   validation/        validation.md, validation.csv, environment.json
#   block_trace.json   one llama3-8b block (TP 1, per-op SAC), rowwise, bf16 and tensorwise:
#                      each step's device time and each kernel's (scripts/block_trace.py)
#   artifacts.tar.gz   generated code, profiler traces, the validation checkpoint if unfinished,
#                      block/ (the block's generated code and traces)
#   log.txt            everything printed (the check first; codegen-vs-GPU kernels, estimates,
#                      the block last)
# With --memory it runs one thing instead (issue #56, a second call): one rank of
# pytorch/pytorch#149990's run (Llama3-70B, FSDP 16 x TP 8, full AC, batch 8 x 8192) trained
# for real on a fake process group, bf16 and tensorwise, with expandable segments (torchtitan's
# launcher) and then without; the caching allocator's peaks beside f8roof's:
#   step_memory.jsonl        one record per arm (scripts/memory_tracker_check.py --device cuda)
#   memory_snapshots.tar.gz  each arm's allocator history (torch.cuda.memory._dump_snapshot)
# What it measures (issue #13): bf16 and torchao's tensorwise and rowwise Float8Linear, each
# standalone and in torchao's benchmark context LayerNorm -> Linear -> Sigmoid; the reference's
# delayed scaling with --full. Time is budgeted, not guessed: calibrate stops at --budget and
# fits on the shapes every variant reached, validate stops at --validate-budget and reports on
# the shapes done, so a 10-minute call returns measurements whatever the compile times are.
#
# Usage (repository root): OUT=/some/dir bash scripts/gpu_session.sh [--device cpu] [--full]
#   [--budget SECONDS] [--validate-budget SECONDS] [--validate-limit N]
#   [--resume-from calibration.json.partial.jsonl] [--memory]
# On the GPU machine (torch 2.11, no torchao): carry torchao's wheel in .whl/ (see README's
# "GPU session"); this script installs it into /tmp/site before anything imports it.
# --device cpu is the dry run CI exercises: tensorwise standalone, tiny shapes, C++ kernels,
# two validation shapes, no first check (scripts/gpu_check.py is tested on CPU apart).
set -uo pipefail
: "${OUT:?set OUT to the output directory}"
device=cuda quick=--quick budget=150 vbudget=150 resume_from="" limit="" check=1 memory=0
# one rank's step memory: #149990's setup on a GPU; on CPU a small llama (no allocator figures)
step_memory=""
block="--recipes rowwise,bf16,tensorwise --budget 90"
variants="torchao:tensorwise,torchao:rowwise"
contexts="none,layernorm+sigmoid"
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --full) quick=""; variants="$variants,reference:tensorwise_delayed"; shift ;;
    --budget) budget=$2; shift 2 ;;
    --validate-budget) vbudget=$2; shift 2 ;;
    --validate-limit) limit="--limit $2"; shift 2 ;;
    --resume-from) resume_from=$2; shift 2 ;;
    --memory) memory=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
if [ "$device" = cpu ]; then  # CI's dry run: what this machine's torch can run on CPU
  variants=$("$python" -c "
from f8roof.profiler.torchao_float8 import available
impl = 'torchao' if available() else 'reference'
print(f'{impl}:tensorwise')")
  contexts=none quick="" budget=900 vbudget=900 block="--small --recipes bf16 --iters 2"
  # gpu_check.py has its own CPU test; two unseen shapes show validate's wiring
  check=0 limit="--limit 2"
fi
mkdir -p "$OUT/validation"
work=$(mktemp -d)
if [ "$device" = cpu ]; then
  printf '%s' '{"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2,
    "vocab_size": 1024}' >"$work/small_llama.json"
  step_memory="--model $work/small_llama.json --seq-len 256 --batch 2 --tp 2 --fsdp 2"
  step_memory="$step_memory --recompute selective --measure"
fi
log="$OUT/log.txt"
start=$(date +%s)
{
  status=0
  if [ "$memory" = 1 ]; then
    for segments in expandable_segments:True ""; do
      for arm in bf16 tensorwise; do  # a process each: one arm's cache is not the next one's
        echo "== one rank's step memory, $arm (${segments:-fixed segments}), fake process group"
        # shellcheck disable=SC2086  # $step_memory holds several arguments
        PYTORCH_CUDA_ALLOC_CONF=$segments timeout 300 "$python" scripts/memory_tracker_check.py \
          --device "$device" $step_memory --recipes "$arm" --out "$OUT/step_memory.jsonl" \
          --snapshot "$work/snapshots" || status=1
      done
      [ $(( $(date +%s) - start )) -gt 270 ] && break  # the fixed arms only if time is left
    done
    [ -d "$work/snapshots" ] && tar czf "$OUT/memory_snapshots.tar.gz" -C "$work" snapshots
    echo "total: $(( $(date +%s) - start ))s"
    exit $status
  fi
  if [ "$check" = 1 ]; then
    echo "== environment and a first check (versions, gemms, every variant compiled once)"
    "$python" scripts/gpu_check.py --device "$device" --variants "$variants" \
      --shape 1024,2048,4096 || status=1
  fi
  resume=""
  if [ -n "$resume_from" ]; then
    cp "$resume_from" "$OUT/calibration.json.partial.jsonl" && resume=--resume
  fi
  echo "== calibrate ($device${quick:+, quick}, budget ${budget}s): $variants x $contexts"
  "$python" -m f8roof calibrate --device "$device" --out "$OUT/calibration.json" $quick $resume \
    --recipes "$variants" --contexts "$contexts" --budget "$budget" \
    --artifacts "$work/artifacts" || status=1
  echo "calibrate: $(( $(date +%s) - start ))s"
  if [ -f "$OUT/calibration.json" ]; then
    echo "== validate (budget ${vbudget}s)"
    "$python" -m f8roof validate --calibration "$OUT/calibration.json" --out "$OUT/validation" \
      --budget "$vbudget" --traces "$work/artifacts/traces" $limit || status=1
    [ -f "$OUT/validation/validation.partial.jsonl" ] \
      && mv "$OUT/validation/validation.partial.jsonl" "$work/artifacts/"
    if [ "$device" = cuda ]; then
      echo "== codegen-only vs the GPU's own compile"
      timeout 60 "$python" scripts/codegen_vs_gpu.py --gpu h200 --variants "$variants" \
        --shape 1024,2048,4096 || true   # differences are findings, not failures
    fi
    echo "== estimate from the new calibration"
    "$python" -m f8roof estimate --calibration "$OUT/calibration.json" --recipe tensorwise --show-all \
      --shape 4096,4096,4096 --shape 16384,8192,8192 || status=1
  fi
  echo "== one block, timed kernel by kernel (TP 1, per-op SAC)"
  # shellcheck disable=SC2086  # $block holds several arguments
  "$python" scripts/block_trace.py --device "$device" --out "$OUT/block_trace.json" \
    --artifacts "$work/artifacts" $block || status=1
  if [ "$device" = cpu ]; then
    echo "== one rank's step memory, trained on a fake process group (the --memory path)"
    # shellcheck disable=SC2086  # $step_memory holds several arguments
    "$python" scripts/memory_tracker_check.py --device cpu $step_memory --recipes bf16 \
      --out "$OUT/step_memory.jsonl" || status=1
  fi
  echo "total: $(( $(date +%s) - start ))s"
  exit $status
} 2>&1 | grep --line-buffered -v "^USDT:" | tee "$log"
status=${PIPESTATUS[0]}
[ -d "$work/artifacts" ] && tar czf "$OUT/artifacts.tar.gz" -C "$work" artifacts
rm -rf "$work"
exit "$status"
