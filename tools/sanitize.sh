#!/usr/bin/env bash
# tools/sanitize.py under NVIDIA compute-sanitizer: memcheck (out-of-bounds and misaligned
# accesses), racecheck (shared-memory hazards), initcheck (reads of uninitialised global memory).
#
#   bash tools/sanitize.sh [TOOL ...] [-- sanitize.py arguments]
#   e.g. bash tools/sanitize.sh                        # plain, memcheck, racecheck, initcheck
#        bash tools/sanitize.sh racecheck -- -k fwd --dtypes bf16
#
# TOOL is memcheck, racecheck, initcheck, synccheck or plain (no sanitizer; it also fills
# Triton's kernel cache, so the sanitizer runs that follow do not compile). One log per tool in
# $OUT (default /tmp/convgemm-sanitize), one summary line per tool here; exit status 1 if any run
# failed (a sanitizer error, a case that failed its check, or a timeout).
# Environment: OUT, PYTHON (python3), COMPUTE_SANITIZER (its path), PRINT_LIMIT (errors printed per
# run, 20), TIMEOUT (seconds per run, 1200).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/convgemm-sanitize}
PY=${PYTHON:-python3}
SAN=${COMPUTE_SANITIZER:-compute-sanitizer}

TOOLS=()
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --) shift; ARGS=("$@"); break ;;
    *) TOOLS+=("$1"); shift ;;
    esac
done
[ ${#TOOLS[@]} -eq 0 ] && TOOLS=(plain memcheck racecheck initcheck)

if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "tools/sanitize.sh: needs a CUDA GPU; nothing run"
    exit 0
fi
if ! command -v "$SAN" >/dev/null 2>&1; then
    for d in "${CUDA_HOME:-}" /usr/local/cuda; do
        if [ -n "$d" ] && [ -x "$d/bin/compute-sanitizer" ]; then SAN="$d/bin/compute-sanitizer"; break; fi
    done
fi

mkdir -p "$OUT"
# no caching allocator: every tensor is its own cudaMalloc, so an access past its end is out of
# bounds for memcheck instead of landing in a neighbouring block of the cache
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 CONVGEMM_AUTOTUNE=0 CONVGEMM_POISON_OUTPUTS=1 PYTHONUNBUFFERED=1

status=0
for tool in "${TOOLS[@]}"; do
    log="$OUT/$tool.log"
    cmd=()
    if [ "$tool" != plain ]; then
        if ! command -v "$SAN" >/dev/null 2>&1; then
            echo "$tool: compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)"
            status=1
            continue
        fi
        cmd=("$SAN" --tool "$tool" --error-exitcode 1 --print-limit "${PRINT_LIMIT:-20}")
        # initcheck: its default reports uninitialised reads only (unused-allocation tracking is
        # off); passing "--track-unused-memory no" made this version read "no" as the program
    fi
    start=$(date +%s)
    timeout "${TIMEOUT:-1200}" ${cmd[@]+"${cmd[@]}"} "$PY" tools/sanitize.py ${ARGS[@]+"${ARGS[@]}"} >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    cases=$(grep -E "^[0-9]+ ok, " "$log" | tail -1)
    if [ "$tool" = plain ]; then
        summary="no sanitizer"
    else
        summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed -E 's/^=+ *//')
        summary=${summary:-"no ERROR or RACECHECK SUMMARY in the log (crashed or timed out?)"}
    fi
    [ $rc -eq 124 ] && summary="$summary; TIMEOUT after ${TIMEOUT:-1200} s"
    echo "$tool: $summary | cases: ${cases:-none finished} | rc=$rc, ${secs}s, log $log"
    [ $rc -ne 0 ] && status=1
done
exit $status
