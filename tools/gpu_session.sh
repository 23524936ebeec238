#!/usr/bin/env bash
# One device call that checks and measures everything a session needs, logs under $OUT.
#   run: bash tools/gpu_session.sh [suites]      (default suites: floor,seed,grouped,small-channel)
# Keep the whole call inside the device tool's 10-minute limit: tests ~1.5 min, tuning ~10 s/shape.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/convgemm-out}
mkdir -p "$OUT"
SUITES=${1:-floor,seed,grouped,small-channel}
nvidia-smi -L
(timeout 320 python3 -m pytest -q -n 14 tests -p no:cacheprovider --tb=short -rf 2>&1 | tail -30) > "$OUT/tests.log"
tail -3 "$OUT/tests.log"
timeout 60 python3 tools/overhead.py --profile > "$OUT/overhead.log" 2>&1; head -6 "$OUT/overhead.log"
CONVGEMM_TUNE_LOG=$OUT/tune.jsonl timeout 420 python3 -m convgemm bench --suite "$SUITES" --dtype bf16 --check \
    --json "$OUT/bench.json" --plot "$OUT/bench.png" > "$OUT/bench.log" 2>&1
grep -E "geom|FAIL" "$OUT/bench.log" | tail -8
