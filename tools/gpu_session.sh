#!/usr/bin/env bash
# One device call that checks and measures what the next session needs, logs and JSON under $OUT.
#   run: bash tools/gpu_session.sh [suites]      (default suites: floor,small-channel)
# Keep the whole call inside the device tool's 10-minute limit: tests ~3 min (-n 14), forward
# tuning ~2 s per new shape, each backward/model step bounded by its own timeout.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/convgemm-out}
mkdir -p "$OUT"
SUITES=${1:-floor,small-channel}
nvidia-smi -L
(timeout 300 python3 -m pytest -q -n 14 tests -p no:cacheprovider --tb=short -rf 2>&1 | grep -v DEBUG | tail -30) > "$OUT/tests.log"
tail -3 "$OUT/tests.log"
timeout 60 python3 tools/overhead.py --profile > "$OUT/overhead.log" 2>&1; head -8 "$OUT/overhead.log"
for d in fwd dgrad wgrad; do
    CONVGEMM_TUNE_LOG=$OUT/tune.jsonl timeout 120 python3 -m convgemm bench --suite "$SUITES" --dtype bf16 \
        --direction $d --check --json "$OUT/bench-$d.json" > "$OUT/bench-$d.log" 2>&1
    echo "bench $d: rc=$?"; grep -E "geom|FAIL" "$OUT/bench-$d.log" | tail -3
done
timeout 120 python3 -m convgemm bench --model craft --no-compile --dtype bf16 --json "$OUT/craft.json" > "$OUT/craft.log" 2>&1
echo "craft: rc=$?"; tail -3 "$OUT/craft.log"
