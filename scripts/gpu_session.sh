#!/usr/bin/env bash
# The one script a session lent a GPU runs: check the environment, calibrate, validate, and
# leave everything under $OUT (at most 8 files come back from the device tool, 2 folders deep):
#   calibration.json   the calibration (checkpoint calibration.json.partial.jsonl beside it
#                      while it runs, so a timed-out call still brings measurements back)
#   validation/        validation.md, validation.csv, environment.json
#   artifacts.tar.gz   generated code, profiler traces, validation checkpoint if unfinished
#   log.txt            everything printed (last: codegen-only vs GPU kernels, then estimates)
# Usage (repository root): OUT=/some/dir bash scripts/gpu_session.sh [--device cpu] [--full]
#   [--budget SECONDS] [--validate-limit N] [--resume-from calibration.json.partial.jsonl]
# Sized for one 10-minute call on an H200: calibrate --quick (6 fit shapes, every recipe, the
# whole gemm grid) within --budget (300 s), then validate the first --validate-limit (30)
# default shapes. --full calibrates all 12 fit shapes. --device cpu is the dry run CI
# exercises (tiny shapes, C++ kernels).
set -uo pipefail
: "${OUT:?set OUT to the output directory}"
device=cuda quick=--quick budget=300 resume_from="" limit="--limit 30"
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --full) quick=""; shift ;;
    --budget) budget=$2; shift 2 ;;
    --resume-from) resume_from=$2; shift 2 ;;
    --validate-limit) limit="--limit $2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
mkdir -p "$OUT/validation"
work=$(mktemp -d)
log="$OUT/log.txt"
start=$(date +%s)
{
  status=0
  echo "== environment"
  "$python" - <<PY
import torch
try:
    import triton; tv = triton.__version__
except ImportError:
    tv = "none"
print("torch", torch.__version__, "triton", tv, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, "SMs", p.multi_processor_count, "memory GiB", round(p.total_memory / 2**30))
PY
  resume=""
  if [ -n "$resume_from" ]; then
    cp "$resume_from" "$OUT/calibration.json.partial.jsonl" && resume=--resume
  fi
  [ "$device" = cpu ] && limit=""
  echo "== calibrate ($device${quick:+, quick}, budget ${budget}s)"
  "$python" -m f8roof calibrate --device "$device" --out "$OUT/calibration.json" $quick $resume \
    --budget "$budget" --artifacts "$work/artifacts" || status=1
  echo "calibrate: $(( $(date +%s) - start ))s"
  if [ -f "$OUT/calibration.json" ]; then
    echo "== validate"
    "$python" -m f8roof validate --calibration "$OUT/calibration.json" --out "$OUT/validation" \
      --traces "$work/artifacts/traces" $limit || status=1
    [ -f "$OUT/validation/validation.partial.jsonl" ] && mv "$OUT/validation/validation.partial.jsonl" "$work/artifacts/"
    if [ "$device" = cuda ]; then
      echo "== codegen-only vs the GPU's own compile"
      "$python" scripts/codegen_vs_gpu.py --gpu h200 || true   # differences are findings, not failures
    fi
    echo "== estimate from the new calibration"
    "$python" -m f8roof estimate --calibration "$OUT/calibration.json" --recipe tensorwise \
      --shape 4096,4096,4096 --shape 16384,8192,8192 || status=1
  fi
  echo "total: $(( $(date +%s) - start ))s"
  exit $status
} 2>&1 | grep --line-buffered -v "^USDT:" | tee "$log"
status=${PIPESTATUS[0]}
[ -d "$work/artifacts" ] && tar czf "$OUT/artifacts.tar.gz" -C "$work" artifacts
rm -rf "$work"
exit "$status"
