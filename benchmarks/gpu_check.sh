#!/usr/bin/env bash
# The GPU check of issue 66.5: what a lent accelerator (one H200) runs in at most 10 minutes, every
# result written to $OUT (default /tmp/gpu_check):
#   machine.txt        the GPU, torch, the commit
#   tests.log          MISPAIR_TEST_DEVICE=cuda pytest (--tb=short -rf) of the CUDA checks and the
#                      engine packages listed in benchmarks/results/cuda_check.md (≤ 300 s)
#   encoders.md        pictures/s of EfficientNet-Lite0 and captions/s of MiniLM, float32 and
#                      autocast float16/bfloat16, with the cosine to float32 (≤ 90 s)
#   audit_scale.md     bench_audit_scale.py's synthetic audit, time per stage (≤ 180 s)
#   status.txt         each step's exit status (124: its time ran out)
# Run from the repository root:   OUT=/some/folder bash benchmarks/gpu_check.sh
# Dry run on a CPU (short, the device forced to cpu):   bash benchmarks/gpu_check.sh --cpu
set -u
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
DEVICE=cuda
PAIRS=20000
TESTS=(tests/test_cuda.py tests/ot tests/division tests/losses tests/nn tests/engine)
SECONDS_PER_ENCODER=20
BATCH=(--pictures 64 --captions 256)
if [ "${1:-}" = "--cpu" ]; then  # prove the script end to end in a few minutes on a CPU
    DEVICE=cpu
    PAIRS=1500
    TESTS=(tests/test_cuda.py tests/ot/test_partial.py)
    SECONDS_PER_ENCODER=2
    BATCH=(--pictures 2 --captions 8)
fi
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && PY=.venv/bin/python
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
: > "$OUT/status.txt"
step() {  # step NAME SECONDS COMMAND...: run it with a time limit, log it, record its status
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - start)) s" >> "$OUT/status.txt"
}

{
    date -u
    git log -1 --oneline 2>/dev/null
    nvidia-smi 2>&1 | head -15
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
    nproc
    uptime
} > "$OUT/machine.txt" 2>&1

XDIST=()
"$PY" -c "import xdist" 2>/dev/null && XDIST=(-n 8)
step tests 300 env MISPAIR_TEST_DEVICE="$DEVICE" "$PY" -m pytest -q -m "not slow" --tb=short -rf \
    "${XDIST[@]}" "${TESTS[@]}"
step encoders 90 "$PY" benchmarks/cuda/encoder_speed.py --device "$DEVICE" \
    --seconds "$SECONDS_PER_ENCODER" "${BATCH[@]}" --out "$OUT/encoders.md"
step audit_scale 180 "$PY" benchmarks/bench_audit_scale.py --sizes "$PAIRS" --short \
    --work "$OUT/audit_work" --label "gpu_check $DEVICE" --write "$OUT/audit_scale.md" \
    "train.device=$DEVICE"
rm -rf "$OUT/audit_work"  # the synthetic collections: large, and rebuilt from the seed
cat "$OUT/status.txt"
