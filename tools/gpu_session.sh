#!/usr/bin/env bash
# Device-call steps for a session, each bounded by its own timeout, logs and JSON under $OUT.
#
#   bash tools/gpu_session.sh STEP [STEP ...]
#
# Steps (pick what fits one call: the device tool allows 10 minutes per command and brings back
# at most 8 files, so each step writes one file and prints its summary lines):
#   tests      the whole suite, -n 14 (more than 340 s in session 7); the last 40 FAILED lines at the end, the full log under $OUT
#   tests1 / tests2  half of the test files each (alternate files), for one call each; with
#              TESTS_PARTS=3, tests1 / tests2 / tests3 a third each
#   tests_left the files TESTS_LEFT names (tools/tests_left.py output from a timed-out tests* step)
#   fuzz       2000 random problems, tuning off, 28 shards (tests/test_fuzz.py); FUZZ_SHARDS="1 3" picks shards
#   large      tests/test_large.py (tensors past 2**31 elements)
#   sanitize   tools/sanitize.sh plain memcheck (racecheck and initcheck: run them as separate steps)
#   racecheck / initcheck
#   floor      convgemm bench --suite floor (bf16, fwd) -> floor.json
#   backward   dgrad and wgrad on floor,resnet50,craft -> dgrad.json, wgrad.json
#   new        the suites and kernels no GPU has run yet: conv1d, conv3d, grouped (depthwise wgrad,
#              the grouped non-finite fix-up) -> new.json
#   models     convgemm bench --model craft and --model resnet50 --train (eager and compile)
#   ab         tools/ab_kernels.py: this session's untimed choices against their alternatives
#   strided    CONVGEMM_STRIDED_TMA=1: tests/test_strided_tma.py, resnet50 fwd and dgrad benches
#   changed    pytest on $TESTS (default: the files this session changed), on GPU $TEST_GPU (default
#              0; on a two-GPU machine give 1 and run benchmarks on GPU 0 at the same time)
#   ddp        tests/test_ddp.py (the NCCL test needs two GPUs)
#   timers     the GPU tests of the tuner's and the benchmark's timers, then the grouped suite under
#              --timer gpu and --timer do_bench -> timer-gpu.json, timer-do_bench.json
#   dwab       tools/depthwise_sweep.py --algorithm both --ab 5: the tap and rows depthwise kernels'
#              configs, then the best of each against cuDNN in alternating rounds -> dwab.log
#   dw7        the rows kernel's every column width on the three 7x7 sweep layers, then its best
#              against cuDNN in alternating rounds; with and without TRIM -> dw7.log, dw7--no-trim.log
#   train      the ResNet-50 training step eager (bench), profile_model and host_split, patched and
#              not -> resnet-train.json, train-prof.log, train-host.log
#   conv3d     the conv3d suite forward, dgrad and wgrad (tuned) -> conv3d.json
#   ws         the Gluon kernel (conv3d_ws / implicit_gemm_ws): its GPU tests, tools/ws_probe.py, and the
#              floor, resnet50 and craft forward suites (tuned) -> ws-tests.log, ws-probe.log, ws-*.json
#   wswgrad    the Gluon wgrad (wgrad_ws / conv3d_wgrad_ws) and strided implicit_gemm_ws: their GPU tests,
#              tools/ws_wgrad_probe.py, the resnet50 / craft / conv3d wgrad suites (tuned) -> wswgrad-tests.log,
#              wswgrad-probe.log, wswgrad-*.json
#   dwwgrad    tools/dw_wgrad_probe.py: the depthwise wgrad rows kernel over elements per thread, columns,
#              strip heights and programs per SM on the grouped suite's depthwise layers -> dwwgrad.log
#   conv1d     the conv1d suite forward (tuned; wav2vec2's strided layers with the phase view's tails) -> conv1d.json
#   small      the small-channel suite forward (tuned: stems, heads) -> small-channel.json
#   grouped    the grouped suite forward, wgrad and dgrad (tuned) -> grouped.json, grouped-wgrad.json,
#              grouped-dgrad.json
#   wgrad      wgrad on resnet50 and craft (tuned, every candidate in tune.jsonl) -> wgrad-resnet50.json,
#              wgrad-craft.json
#   wgradsweep tools/wgrad_sweep.py: a grid of wgrad_tma tiles x stages x splits x reduce on the
#              slowest wgrad layers of session 14, cold L2, against cuDNN -> wgradsweep.log
#   hostab     tools/host_split.py on CRAFT (eager, fused) with CONVGEMM_REPLAY=1/0 in alternating
#              processes -> hostab.log
#   compile    torch.compile with the Inductor lowerings: their GPU tests (CRAFT tunes every layer
#              first), tools/compile_ab.py --fuse --profile on and off, CRAFT's compile rows, then
#              ResNet-50's compiled training step -> compile-tests.log, compile-ab.log, craft-compile.json,
#              resnet-compile.json (its timeouts add up to more than one call: give the ResNet part a
#              call of its own, RESNET_COMPILE_TIMEOUT, or cut COMPILE_TESTS_TIMEOUT)
#   dietab     tools/host_diet_ab.py: session 22's warm-call host diet on and off in alternating rounds of
#              one process, CRAFT eager and fused, the ResNet-50 step on one thread -> dietab.log
#   s23        session 23's untimed changes: the GPU tests of the grouped fix-up and the depthwise rows
#              kernels, the 768 @7 one-channel tiles forced (depthwise_sweep --configs), then the grouped
#              suite with an empty tuning cache (first-call tuning of ResNeXt after the shared fix-up
#              compile; the tuner's pick on 768 @7), tools/launch_cost.py on two ResNet-50 layers,
#              tools/tune_time.py on a ResNeXt and a ResNet layer -> s23-tests.log, s23-sweep768.log,
#              s23-grouped.json, s23-launch-cost.log, s23-tune-time.log
#   s24        the compile worker pool and the CUDA-graph fixes: tests/test_compile_pool.py,
#              test_tune_cache.py and the two cudagraph-trees training tests, tools/tune_time.py on
#              a ResNet-50 layer (16 threads against 8 worker processes), then ConvNeXt's 7x7
#              layers from empty caches -> s24-tests.log, s24-tune-time.log, s24-dw7.json,
#              s24-tune-dw7.jsonl
#   s25        session 25's open questions: tools/dgrad3d_host.py on r3d-18's strided l2 and its l1
#              (is the eight-launch phase dgrad host-bound?), the conv3d dgrad suite with its tuner
#              log, then test_nn.py's GPU tests -> s25-dgrad3d-host.log, s25-dgrad3d.json,
#              s25-tune-dgrad3d.jsonl, s25-nn-tests.log
#   s27        tools/first_call.py and the small-channel + seed suites from empty caches (per-candidate
#              load times in the tuner log), then the tf32 forward over the all suite -> first-call.log,
#              sc-seed.json/.log, tune-sc-seed.jsonl, tf32-all.json/.log, tune-tf32.jsonl
#   s27b       tools/first_call.py (gray 1->16 second), tests/test_tune_load.py, the split-K and Gluon
#              launch tests -> first-call.log, tune-load-test.log, tests.log
#   s27c       tests/test_tune_load.py and test_layout.py, then the small-channel and seed suites from
#              empty caches -> tests.log, tune-sc-seed.jsonl, sc-seed.json/.log
#   s27d       the all suite from empty caches -> all.json, all.log, all-tune.jsonl
#   s30a       flat_rows' GPU tests (the persistent form removed), then tools/dw_floor.py: MobileNetV2's depthwise
#              3x3 layers against a copy of their bytes, cuDNN, the tuned choice and a plain direct kernel
#              -> tests.log, dwfloor.log
#   s31a       session 30's untimed work in one call: the parts step, then the small-channel and grouped forward
#              suites from empty caches (gray's first call without the rows kernel; the depthwise shorter strips)
#              -> tests.log, parts-probe.log, small.json/.log, grouped.json/.log, tune-s31a.jsonl
#   nchw       the all suite forward with NCHW input (issue 9: never slower than cuDNN given the same NCHW input;
#              last measured on the floor suite in session 9) -> nchw-all.json/.log
#   parts      implicit_gemm_tma's pixel-tile parts (matmul.blocks.parts_gemm_kernel, session 30, untimed): their
#              GPU tests, then tools/config_probe.py on the ResNet-50 layers whose batch-64 pixel counts fill 132 SMs
#              with 192-pixel tiles -> tests.log, parts-probe.log
#   ncu        Nsight Compute (SpeedOfLight, memory, scheduler, warp state, occupancy, launch) on
#              tools/ncu_probe.py's launches: l3 1x1 reduce (cuBLAS, cuDNN, convgemm), depthwise 3x3 144 @56
#              (copy, cuDNN, convgemm), narrow 8->8 (cuDNN, convgemm); NCU_ARGS="--shape ... --try ..." profiles
#              other layers and forced forms instead -> ncu.log
#   s30b       the head and flat_rows GPU tests, then the all suite in bf16 from empty caches -> tests.log,
#              all.json/.log, tune-all.jsonl
#   s29next    after session 29: flat_rows' GPU tests (the persistent form's configs too), config_probe of the
#              persistent form on narrow 8->8, the seed's 16->16 and CRAFT's 16->16 head, then the all suite in
#              bf16 from empty caches (the first shape's pruned candidates) -> tests.log, probe.log, all.json/.log,
#              tune-all.jsonl
#   s29a       flat_rows (new): its GPU tests, then the small-channel and seed suites in bf16 and fp16 from
#              empty caches (every candidate in tune-*.jsonl) -> tests.log, sc-{bf16,fp16}.json/.log,
#              tune-{bf16,fp16}.jsonl
#   s29b       flat_rows' GPU tests, then the all suite in bf16 and fp16 from empty caches -> tests.log,
#              all.json/.log, tune-all.jsonl, fp16-all.json/.log
#   s28a       every fp32 candidate config (strict and TF32) on the GPU, then tf32 and strict fp32 over
#              resnet50 + craft; OLD_SRC=path/to/src adds strict fp32 on resnet50 with that tree
#              -> tests.log, tf32.json/.log, fp32.json/.log, tune-*.jsonl, fp32-old.json/.log
#   s28b       every fp32 candidate config (GPU test), the grouped suite from empty caches, fp16 over the
#              all suite -> tests.log, grouped.json/.log, tune-grouped.jsonl, fp16-all.json/.log
#   s28c       tf32 over the all suite -> tf32-all.json/.log
#   s27next    width_unfold in fp32: GPU tests, the tf32 small-channel + seed + resnet50 suites; the grouped suite
#              from empty caches -> tests.log, tf32-sc-seed.json/.log, tune-tf32.jsonl, grouped.json/.log,
#              tune-grouped.jsonl
#   tf32       the tf32 forward over the all suite -> tf32-all.json/.log, tune-tf32.jsonl
#   s26next    the all suite from empty caches (first-call tuning with the launcher prebuild and the
#              one-channel unfold prune), then tools/dgrad3d_host.py --profile 200, then
#              tools/config_probe.py on l3 1x1 reduce's 256-channel tile -> all.json, all-tune.jsonl,
#              all.log, dgrad3d-profile.log, l3-reduce-probe.log
#   s26        the tuner's launcher prebuild: the compile-pool and tune-cache GPU tests, then the
#              small-channel and seed suites from empty caches with the prebuild off and on; the
#              resnet50 suite tuned (split-K candidates) -> s26-tests.log, s26-prebuild-{off,on}.json,
#              s26-tune-{off,on}.jsonl, s26-resnet50.json, s26-tune-resnet50.jsonl
#   coldwarm   tools/cold_warm.py --all on $COLDWARM_SHAPES (default: the ten slowest forward layers
#              against cuDNN in session 12): every candidate L2 warm and cold -> coldwarm.json, .log
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/convgemm-out}
mkdir -p "$OUT"
l4_probe() {  # l4_probe LOG --try FORM ...: the forms on ResNet-50's l4 3x3 (first) and l4 3x3 @7, untuned -> LOG
    local log=$1
    shift
    for shape in 64,512,14,14,512,3,3,2,1,1,1,nobias 64,512,7,7,512,3,3,1,1,1,1,nobias; do
        CONVGEMM_AUTOTUNE=0 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --shape $shape \
            "$@" 2>&1 | grep -v Warning
    done | tee "$OUT/$log"
}
bench() {  # bench NAME TIMEOUT ARGS...: one JSON and its geomean lines
    local name=$1 t=$2
    shift 2
    CONVGEMM_TUNE_LOG=$OUT/tune.jsonl timeout "$t" python3 -m convgemm bench --dtype bf16 --check \
        --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
    echo "bench $name: rc=$?"
    grep -E "geom|FAIL|Error" "$OUT/$name.log" | tail -4
}
pdl_summary() {  # pdl_summary DIR: the CONVGEMM_PDL A/B's JSONs (pdlw*/pdlf* by process) -> pdl-summary.log, pdl-all.json
    python3 - "$1" "$OUT/pdl-all.json" <<'PY' | tee "$OUT/pdl-summary.log"
import glob, json, sys
every = {}
for f in sorted(glob.glob(sys.argv[1] + "/pdl[wf]*.json")):
    d = every[f.split("/")[-1]] = json.load(open(f))
    rows = d["rows"] if isinstance(d, dict) else d
    print(f.split("/")[-1], " ".join(f"{r['convgemm_us']:.1f}/{r['cudnn_us']:.1f}" for r in rows))
    if f.endswith("0-r1.json"):
        for r in rows:
            print("  ", r["name"], r["algorithm"], r["config"])
json.dump(every, open(sys.argv[2], "w"))
PY
}
for step in "$@"; do
    case "$step" in
    tests | tests[1-9] | tests_left)
        # the whole suite reached 92% in 340 s in session 7 (82-90% of each half in 480-490 s in
        # session 45): tests1 and tests2 each run half of the files (alternating, so the heavy
        # model and fuzz files split). The full -v log ($step-full.log) and the collected node ids
        # come back even when the timeout ends the run; tools/tests_left.py turns them into what
        # is left, which tests_left runs (TESTS_LEFT: a file of its output lines, files only)
        files=tests
        if [ "$step" = tests_left ]; then
            files=$(grep -v '^#' "${TESTS_LEFT:?TESTS_LEFT: a file of tools/tests_left.py output}")
        elif [ "$step" != tests ]; then
            # TESTS_PARTS=3: tests1..tests3 each a third (the halves overran 480 s in session 45)
            part=${step#tests}
            files=$(ls tests/test_*.py | awk -v p="$part" -v n="${TESTS_PARTS:-2}" 'NR % n == p % n')
        fi
        # shellcheck disable=SC2086  # $files is a list of paths
        python3 -m pytest --collect-only -q $files -p no:cacheprovider >"$OUT/$step-collected.txt" 2>&1
        # shellcheck disable=SC2086
        timeout "${TESTS_TIMEOUT:-420}" python3 -m pytest -v -n 14 $files -p no:cacheprovider --tb=short -W ignore --durations=40 2>&1 |
            tee "$OUT/$step-full.log" | grep -E "FAILED|ERROR|passed|failed" | tail -40 | tee "$OUT/$step.log"
        python3 tools/tests_left.py "$OUT/$step-collected.txt" "$OUT/$step-full.log" | tee "$OUT/$step-left.txt" | tail -30 ;;
    fuzz)
        # about 3-6 s per problem on a fresh machine (compile-bound): 16 of the 28 shards finish in
        # 420 s on 14 workers, so a run may take two calls; FUZZ_SHARDS picks shards by number,
        # e.g. FUZZ_SHARDS="1 3 5" (same seed, so two calls together cover the 2000 problems).
        # Node ids, not -k: "-k shard1" also selects shard10-shard19.
        ids="tests/test_fuzz.py::test_random_problems"
        if [ -n "${FUZZ_SHARDS:-}" ]; then
            ids=$(for i in $FUZZ_SHARDS; do printf 'tests/test_fuzz.py::test_random_problems[shard%s] ' "$i"; done)
        fi
        # shellcheck disable=SC2086  # $ids is a list of node ids
        CONVGEMM_AUTOTUNE=0 CONVGEMM_FUZZ_EXAMPLES=2000 CONVGEMM_FUZZ_SHARDS=28 timeout "${FUZZ_TIMEOUT:-500}" \
            python3 -m pytest -v -n 14 $ids -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "PASSED|FAILED|Falsifying|passed|failed" | tail -40 |
            tee "$OUT/fuzz.log" ;;
    large)
        timeout 200 python3 -m pytest -v -m large tests/test_large.py -p no:cacheprovider --tb=short -W ignore 2>&1 |
            grep -E "PASSED|FAILED|SKIPPED|passed|failed" | tee "$OUT/large.log" ;;
    sanitize) OUT=$OUT TIMEOUT=250 bash tools/sanitize.sh plain memcheck ;;
    racecheck | initcheck) OUT=$OUT TIMEOUT=500 bash tools/sanitize.sh "$step" ;;
    floor) bench floor 90 --suite floor ;;
    backward)
        bench dgrad 150 --suite floor,resnet50,craft --direction dgrad
        bench wgrad 150 --suite floor,resnet50,craft --direction wgrad ;;
    new)
        bench new "${NEW_TIMEOUT:-250}" --suite conv1d,conv3d,grouped --direction fwd
        bench grouped-wgrad "${WGRAD_TIMEOUT:-150}" --suite grouped --direction wgrad ;;
    models)
        # MODELS_ARGS=--no-compile: eager rows only (the compile rows, CUDA graphs included, take
        # most of the time: about 400 s for both models in session 6 with tuning)
        # shellcheck disable=SC2086  # MODELS_ARGS is a list of options
        timeout 200 python3 -m convgemm bench --model craft --dtype bf16 ${MODELS_ARGS:-} --json "$OUT/craft.json" \
            > "$OUT/craft.log" 2>&1
        echo "craft: rc=$?"; tail -5 "$OUT/craft.log"
        # shellcheck disable=SC2086
        timeout 380 python3 -m convgemm bench --model resnet50 --train --dtype bf16 ${MODELS_ARGS:-} \
            --json "$OUT/resnet.json" > "$OUT/resnet.log" 2>&1
        echo "resnet50 train: rc=$?"; tail -4 "$OUT/resnet.log" ;;
    ab) timeout "${AB_TIMEOUT:-300}" python3 tools/ab_kernels.py ${AB_ARGS:-} 2>&1 | tail -20 | tee "$OUT/ab.log" ;;
    strided)
        # the stride-phase TMA forward and dgrad (CONVGEMM_STRIDED_TMA=1): their tests on the GPU,
        # then resnet50 forward and dgrad with it on (the tuner times the forward against the
        # gather kernel; dgrad routes strided 3x3 layers to it); compare with backward.json/floor
        CONVGEMM_STRIDED_TMA=1 timeout 200 python3 -m pytest -q -n 8 tests/test_strided_tma.py -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "FAILED|Error|passed|failed" | tail -20 | tee "$OUT/strided-tests.log"
        CONVGEMM_STRIDED_TMA=1 bench strided-fwd 150 --suite resnet50 --direction fwd
        CONVGEMM_STRIDED_TMA=1 bench strided-dgrad 150 --suite resnet50 --direction dgrad ;;
    changed)
        # -v: each test's outcome is a line as it happens, so a run cut short by the timeout still
        # names its failures (session 16 lost two test steps' results to -q); the full log is kept
        # shellcheck disable=SC2086  # $TESTS is a list of paths
        CUDA_VISIBLE_DEVICES=${TEST_GPU:-0} timeout "${TESTS_TIMEOUT:-300}" python3 -m pytest -v -n 8 ${TESTS:-tests} \
            -p no:cacheprovider --tb=short -W ignore > "$OUT/changed-full.log" 2>&1
        echo "changed: rc=$? (124: the timeout cut it short)"
        grep -E "FAILED|ERROR|passed|failed" "$OUT/changed-full.log" | grep -v " PASSED" | tail -30 | tee "$OUT/changed.log"
        echo "$(grep -c " PASSED" "$OUT/changed-full.log") passed so far" ;;
    ddp)
        timeout 150 python3 -m pytest -v tests/test_ddp.py -p no:cacheprovider --tb=short -W ignore 2>&1 |
            grep -E "PASSED|FAILED|SKIPPED|passed|failed|Error" | tee "$OUT/ddp.log" ;;
    timers)
        timeout 120 python3 -m pytest -v -m gpu tests/test_bench.py tests/test_tune_cache.py -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E --line-buffered "PASSED|FAILED|^E |passed|failed" | tail -20
        bench timer-gpu "${TIMER_TIMEOUT:-200}" --suite grouped --timer gpu
        bench timer-do_bench "${TIMER_TIMEOUT:-200}" --suite grouped --timer do_bench ;;
    dwab)
        CONVGEMM_AUTOTUNE=0 timeout "${DWAB_TIMEOUT:-400}" python3 tools/depthwise_sweep.py --algorithm both --ab 5 \
            ${DWAB_ARGS:-} > "$OUT/dwab.log" 2>&1
        echo "dwab: rc=$?"; grep -E "==|A/B" "$OUT/dwab.log" ;;
    dw7)
        # with and without the trimmed first and last steps (DepthwiseRows.trim), one after the other
        for trim in "" --no-trim; do
            CONVGEMM_AUTOTUNE=0 timeout "${DW7_TIMEOUT:-200}" python3 tools/depthwise_sweep.py --algorithm depthwise_rows \
                --only 3 4 5 --stages 2 --ab 5 $trim > "$OUT/dw7$trim.log" 2>&1
            echo "dw7 $trim: rc=$?"; grep -E "==|A/B" "$OUT/dw7$trim.log"
        done ;;
    wgrad)
        bench wgrad-resnet50 "${WGRAD_TIMEOUT:-240}" --suite resnet50 --direction wgrad
        bench wgrad-craft "${WGRAD_TIMEOUT:-240}" --suite craft --direction wgrad ;;
    wgradsweep)
        timeout "${SWEEP_TIMEOUT:-400}" python3 tools/wgrad_sweep.py > "$OUT/wgradsweep.log" 2>&1
        echo "wgradsweep: rc=$?"; grep -E "==|tuner's best|geomean" "$OUT/wgradsweep.log" ;;
    hostab)
        # the nn modules' plan replay on and off in alternating processes (host time per CRAFT
        # iteration, eager and fused; session 15's call G)
        for v in "" --fuse; do
            for r in 1 0 1 0; do
                echo "REPLAY=$r $v"
                # shellcheck disable=SC2086  # $v is an option or nothing
                CONVGEMM_REPLAY=$r timeout 60 python3 tools/host_split.py --model craft $v 2>&1 | grep "^== "
            done
        done | tee "$OUT/hostab.log" ;;
    train)
        # the ResNet-50 training step, eager: the bench (tunes every layer, fills the plan cache),
        # then where the time goes, patched and not (profile_model), and host against wall plus
        # the nested timers (host_split) -> resnet-train.json, train-prof.log, train-host.log
        timeout "${TRAIN_TIMEOUT:-300}" python3 -m convgemm bench --model resnet50 --train --dtype bf16 --no-compile \
            --json "$OUT/resnet-train.json" > "$OUT/resnet-train.log" 2>&1
        echo "resnet50 train: rc=$?"; tail -4 "$OUT/resnet-train.log"
        for v in "" --unpatched; do
            # shellcheck disable=SC2086  # $v is an option or nothing
            timeout 90 python3 tools/profile_model.py --model resnet50 --train --top 30 $v 2>&1
        done > "$OUT/train-prof.log"
        grep -E "^==|synchronised|inside|descriptors" "$OUT/train-prof.log"
        for v in "" --unpatched; do
            # shellcheck disable=SC2086
            timeout 90 python3 tools/host_split.py --model resnet50 --train $v 2>&1
        done | tee "$OUT/train-host.log" ;;
    compile)
        timeout "${COMPILE_TESTS_TIMEOUT:-240}" python3 -m pytest -v -n 8 tests/test_autograd.py tests/test_conv3d.py \
            tests/test_transpose.py tests/test_activation.py -k "inductor or compile" -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "PASSED|FAILED|ERROR|passed|failed" > "$OUT/compile-tests.log"
        echo "compile tests: $(grep -c PASSED "$OUT/compile-tests.log") passed"; grep -E "FAILED|ERROR" "$OUT/compile-tests.log"
        for l in 1 0; do
            CONVGEMM_INDUCTOR_LOWERING=$l timeout 120 python3 tools/compile_ab.py --fuse --profile 2>&1
        done > "$OUT/compile-ab.log"
        grep -E "compile  lowering|us/call|of which" "$OUT/compile-ab.log"
        timeout 200 python3 -m convgemm bench --model craft --dtype bf16 \
            --modes "compile,fused compile,fused compile vs folded,fused compile cudagraphs" \
            --json "$OUT/craft-compile.json" > "$OUT/craft-compile.log" 2>&1
        echo "craft compile: rc=$?"; grep -A1 "^craft" "$OUT/craft-compile.log"
        timeout "${RESNET_COMPILE_TIMEOUT:-400}" python3 -m convgemm bench --model resnet50 --train --dtype bf16 \
            --modes compile --json "$OUT/resnet-compile.json" > "$OUT/resnet-compile.log" 2>&1
        echo "resnet50 compile: rc=$?"; grep -A1 "^resnet" "$OUT/resnet-compile.log" ;;
    conv3d) bench conv3d "${CONV3D_TIMEOUT:-260}" --suite conv3d --direction all ;;
    conv1d) bench conv1d "${CONV1D_TIMEOUT:-200}" --suite conv1d --direction fwd ;;
    ws)
        timeout "${WS_TESTS_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_conv3d.py \
            tests/test_activation.py tests/test_tune_cache.py -k "ws or nchw_transpose or relu or fusing" \
            > "$OUT/ws-tests.log" 2>&1
        echo "ws tests: rc=$?"; tail -3 "$OUT/ws-tests.log"
        timeout "${WS_PROBE_TIMEOUT:-120}" python3 tools/ws_probe.py > "$OUT/ws-probe.log" 2>&1
        echo "ws probe: rc=$?"
        for suite in floor resnet50 craft; do bench "ws-$suite" "${WS_TIMEOUT:-200}" --suite "$suite" --direction fwd; done ;;
    wswgrad)
        timeout "${WS_TESTS_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_ws_wgrad.py \
            tests/test_conv3d.py tests/test_backward.py -k "ws or gpu_wgrad_tma_every_config" \
            > "$OUT/wswgrad-tests.log" 2>&1
        echo "wswgrad tests: rc=$?"; tail -3 "$OUT/wswgrad-tests.log"
        timeout "${WS_PROBE_TIMEOUT:-150}" python3 tools/ws_wgrad_probe.py > "$OUT/wswgrad-probe.log" 2>&1
        echo "wswgrad probe: rc=$?"
        for suite in resnet50 craft conv3d; do
            bench "wswgrad-$suite" "${WS_TIMEOUT:-120}" --suite "$suite" --direction wgrad
        done ;;
    dwwgrad)
        timeout "${DW_PROBE_TIMEOUT:-420}" python3 tools/dw_wgrad_probe.py ${DW_PROBE_ARGS:-} > "$OUT/dwwgrad.log" 2>&1
        echo "dwwgrad probe: rc=$?"; grep -c . "$OUT/dwwgrad.log" ;;
    small) bench small-channel "${SMALL_TIMEOUT:-200}" --suite small-channel --direction fwd ;;
    grouped)
        bench grouped "${GROUPED_TIMEOUT:-240}" --suite grouped --direction fwd
        bench grouped-wgrad "${GROUPED_TIMEOUT:-240}" --suite grouped --direction wgrad
        bench grouped-dgrad "${GROUPED_TIMEOUT:-240}" --suite grouped --direction dgrad ;;
    coldwarm)
        shapes=${COLDWARM_SHAPES:-"64,512,14,14,512,3,3,2,1,1,1 64,1024,14,14,256,1,1,1,0,1,1 64,128,56,56,128,3,3,2,1,1,1
            16,256,14,14,256,3,3,1,0,1,1 64,1024,14,14,512,1,1,1,0,1,1 16,96,24,24,256,5,5,1,0,1,1
            64,512,7,7,2048,1,1,1,0,1,1 64,256,28,28,256,3,3,2,1,1,1 64,2048,7,7,512,1,1,1,0,1,1
            1,512,96,96,512,3,3,1,1,1,1"}
        # shellcheck disable=SC2086  # $shapes is a list
        timeout "${COLDWARM_TIMEOUT:-240}" python3 tools/cold_warm.py --all --json "$OUT/coldwarm.json" $shapes \
            > "$OUT/coldwarm.log" 2>&1
        echo "coldwarm: rc=$?"; grep -E "==|pick|geomean" "$OUT/coldwarm.log" ;;
    dietab)
        for v in "--model craft" "--model craft --fuse" "--model resnet50 --train --one-thread --rounds 4"; do
            # shellcheck disable=SC2086  # $v is a list of options
            timeout "${DIETAB_TIMEOUT:-150}" python3 tools/host_diet_ab.py $v 2>&1 | grep -E "^(==|--)"
        done | tee "$OUT/dietab.log" ;;
    s23)
        timeout "${TESTS_TIMEOUT:-150}" python3 -m pytest -q -n 12 -p no:cacheprovider --tb=short -W ignore \
            tests/test_nonfinite.py tests/test_activation.py tests/test_depthwise.py > "$OUT/s23-tests.log" 2>&1
        echo "s23 tests: rc=$?"; tail -3 "$OUT/s23-tests.log"
        timeout 90 python3 tools/depthwise_sweep.py --algorithm depthwise_rows --only 5 \
            --configs "2,64,7,4,2,4,1;1,128,7,4,2,7,1;1,64,7,2,2,7,1;1,32,7,1,2,7,1" > "$OUT/s23-sweep768.log" 2>&1
        grep -E "==|depthwise_rows" "$OUT/s23-sweep768.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/s23-tune-grouped.jsonl timeout 260 python3 -m convgemm bench \
            --suite grouped --dtype bf16 --check --json "$OUT/s23-grouped.json" > "$OUT/s23-grouped.log" 2>&1
        echo "s23 grouped: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/s23-grouped.log" | tail -3
        for shp in 64,256,14,14,256,3,3,1,1,1,1 64,1024,14,14,256,1,1,1,0,1,1; do
            timeout 60 python3 tools/launch_cost.py --shape $shp 2>&1
        done | tee "$OUT/s23-launch-cost.log"
        for shp in 64,1024,7,7,1024,3,3,1,1,1,32 64,256,14,14,256,3,3,1,1,1,1; do
            timeout 90 python3 tools/tune_time.py --shape $shp --workers 1 4 16 2>&1
        done | tee "$OUT/s23-tune-time.log" ;;
    s24)
        timeout "${TESTS_TIMEOUT:-100}" python3 -m pytest -q -n 4 -p no:cacheprovider --tb=short -W ignore \
            tests/test_compile_pool.py tests/test_tune_cache.py \
            "tests/test_autograd.py::test_first_tuning_inside_cuda_graph_warmup_keeps_no_pool_tensor" \
            "tests/test_autograd.py::test_torch_compile_cuda_graphs_training_matches_eager" > "$OUT/s24-tests.log" 2>&1
        echo "s24 tests: rc=$?"; grep -E "FAILED|Error|passed|failed" "$OUT/s24-tests.log" | tail -8
        timeout 60 python3 tools/tune_time.py --shape 64,256,14,14,256,3,3,1,1,1,1 --workers 16 --procs 8 2>&1 |
            grep -v Warning | tee "$OUT/s24-tune-time.log"
        # ConvNeXt's four 7x7 layers from empty caches (tuning and Triton's): first-call tuning with
        # tl.fma in the rows kernels and the compile workers (ready from the second layer on)
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/s24-tune-dw7.jsonl \
            timeout 100 python3 -m convgemm bench --dtype bf16 --check --json "$OUT/s24-dw7.json" \
            --shape 64,96,56,56,96,7,7,1,3,1,96 --shape 64,192,28,28,192,7,7,1,3,1,192 \
            --shape 64,384,14,14,384,7,7,1,3,1,384 --shape 64,768,7,7,768,7,7,1,3,1,768 > "$OUT/s24-dw7.log" 2>&1
        echo "s24 dw7: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/s24-dw7.log" | tail -3
        grep '"tune"' "$OUT/s24-tune-dw7.jsonl" ;;
    s25)
        for shp in 8,64,16,56,56,128,3,3,3,2,1 8,64,16,56,56,64,3,3,3,1,1; do
            timeout 120 python3 tools/dgrad3d_host.py --shape "$shp" 2>&1 | grep -v Warning
        done | tee "$OUT/s25-dgrad3d-host.log"
        CONVGEMM_TUNE_LOG=$OUT/s25-tune-dgrad3d.jsonl timeout 200 python3 -m convgemm bench --dtype bf16 --check \
            --suite conv3d --direction dgrad --json "$OUT/s25-dgrad3d.json" > "$OUT/s25-dgrad3d.log" 2>&1
        echo "s25 dgrad3d: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/s25-dgrad3d.log" | tail -3
        timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest -q -n 8 -p no:cacheprovider --tb=short -W ignore \
            tests/test_nn.py > "$OUT/s25-nn-tests.log" 2>&1
        echo "s25 nn tests: rc=$?"; grep -E "FAILED|Error|passed|failed" "$OUT/s25-nn-tests.log" | tail -8 ;;
    s26)
        # session 26: the launcher prebuild (A/B from empty caches, the same process otherwise) and the
        # split-K candidates for few-tile dense layers (the resnet50 suite, tuned)
        timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider --tb=short -W ignore tests/test_compile_pool.py \
            tests/test_tune_cache.py > "$OUT/s26-tests.log" 2>&1
        echo "s26 tests: rc=$?"; grep -E "FAILED|passed|failed" "$OUT/s26-tests.log" | tail -4
        for mode in off on; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/s26-tune-$mode.jsonl \
                timeout 200 python3 -c "import sys; import convgemm.tune.compile_pool as cp
if '$mode' == 'off': cp.prebuild_launcher = lambda k: False
from convgemm.cli import main
sys.argv = ['convgemm', 'bench', '--suite', 'small-channel,seed', '--dtype', 'bf16', '--check', '--json', '$OUT/s26-prebuild-$mode.json']
sys.exit(main())" > "$OUT/s26-prebuild-$mode.log" 2>&1
            echo "s26 prebuild $mode: rc=$?"
        done
        python3 - "$OUT" <<'PY'
import json, math, sys
for mode in ("off", "on"):
    try:
        rows = json.load(open(f"{sys.argv[1]}/s26-prebuild-{mode}.json"))["rows"]
    except OSError:
        continue
    ts = [r.get("tune_s") or 0 for r in rows]
    g = math.exp(sum(math.log(r["speedup"]) for r in rows) / len(rows))
    print(f"prebuild {mode}: {len(rows)} shapes, tuning sum {sum(ts):.1f} s, max {max(ts):.2f}, over 3 s: "
          f"{sum(t > 3 for t in ts)}, geomean {g:.3f}")
PY
        CONVGEMM_TUNE_LOG=$OUT/s26-tune-resnet50.jsonl timeout 200 python3 -m convgemm bench --dtype bf16 --check \
            --suite resnet50 --json "$OUT/s26-resnet50.json" > "$OUT/s26-resnet50.log" 2>&1
        echo "s26 resnet50: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/s26-resnet50.log" | tail -3 ;;
    s27)
        # where a process's first call and the tuner's load phase go (per-candidate load_s in
        # the tuner log), both from empty caches; then the tf32 forward over the all suite
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/first_call.py \
            2>&1 | grep -v Warning > "$OUT/first-call.log"
        echo "first_call: rc=$?"; head -9 "$OUT/first-call.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-sc-seed.jsonl \
            timeout 150 python3 -m convgemm bench --dtype bf16 --check --suite small-channel,seed \
            --json "$OUT/sc-seed.json" > "$OUT/sc-seed.log" 2>&1
        echo "sc-seed: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/sc-seed.log" | tail -3
        # the tf32 forward over the all suite (issue 9: tf32 geomean >= 1.5x; last timed on the
        # seed suite in session 5)
        CONVGEMM_TUNE_LOG=$OUT/tune-tf32.jsonl timeout 400 python3 -m convgemm bench --dtype tf32 --check \
            --suite all --json "$OUT/tf32-all.json" > "$OUT/tf32-all.log" 2>&1
        echo "tf32 all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/tf32-all.log" | tail -3 ;;
    s27b)
        # the first call without sympy, the gray layer's first call profiled (its load phase),
        # the compile pass against the first launches (tests/test_tune_load.py), and the tests
        # of the Gluon forward's split-K (its finish kernel now compiled in the compile pass)
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/first_call.py \
            --second 8,1,64,64,16,5,5,1,2,1,1 --top 25 2>&1 | grep -v Warning > "$OUT/first-call.log"
        echo "first_call: rc=$?"; head -9 "$OUT/first-call.log"
        timeout 200 python3 -m pytest -v tests/test_tune_load.py -p no:cacheprovider --tb=short -W ignore \
            > "$OUT/tune-load-test.log" 2>&1
        echo "test_tune_load: rc=$?"; grep -E "passed|failed|closest|not compiled" "$OUT/tune-load-test.log" | tail -12
        timeout 200 python3 -m pytest -q -n 14 tests/test_split_k.py tests/test_gluon_launch.py tests/test_tune_cache.py \
            -p no:cacheprovider --tb=line -W ignore 2>&1 | grep -E "FAILED|ERROR|passed|failed" | tail -12 \
            | tee "$OUT/tests.log" ;;
    s27c)
        # the compile pass against the first launches again (the NCHW result's transpose now in
        # the compile pass), then the small-channel and seed suites from empty caches: first calls
        timeout 200 python3 -m pytest -v tests/test_tune_load.py tests/test_layout.py -p no:cacheprovider --tb=short \
            -W ignore > "$OUT/tests.log" 2>&1
        echo "tests: rc=$?"; grep -E "passed|failed|closest|not compiled" "$OUT/tests.log" | tail -8
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-sc-seed.jsonl \
            timeout 200 python3 -m convgemm bench --dtype bf16 --check --suite small-channel,seed \
            --json "$OUT/sc-seed.json" > "$OUT/sc-seed.log" 2>&1
        echo "sc-seed: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/sc-seed.log" | tail -3 ;;
    s27d)
        # the whole all suite from empty caches once more, after session 27's first-call changes
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/all-tune.jsonl \
            timeout 290 python3 -m convgemm bench --dtype bf16 --check --suite all --json "$OUT/all.json" \
            > "$OUT/all.log" 2>&1
        echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3 ;;
    s29a)
        # session 29: flat_rows (each filter row one contiguous NHWC run, one dot per row): GPU
        # tests in every dtype, then the small-channel and seed suites from empty caches
        timeout 200 python3 -m pytest -q -n 14 tests/test_flat_rows.py tests/test_conv2d.py \
            -k "flat_rows or exercised" -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -12 | tee "$OUT/tests.log"
        for m in bf16 fp16; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-$m.jsonl timeout 200 python3 -m convgemm bench \
                --dtype $m --check --suite small-channel,seed --json "$OUT/sc-$m.json" > "$OUT/sc-$m.log" 2>&1
            echo "$m: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/sc-$m.log" | tail -3
        done ;;
    s30a)
        timeout 150 python3 -m pytest -q -n 14 tests/test_flat_rows.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -12 | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 300 python3 tools/dw_floor.py 2>&1 | grep -v Warning \
            | tee "$OUT/dwfloor.log" ;;
    nchw)
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-nchw.jsonl \
            timeout "${NCHW_TIMEOUT:-300}" python3 -m convgemm bench --dtype bf16 --check \
            --suite all --layout nchw --json "$OUT/nchw-all.json" > "$OUT/nchw-all.log" 2>&1
        echo "nchw all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/nchw-all.log" | tail -3 ;;
    nchwprobe)  # session 32: the NCHW 1x1 layers read as whole planes, tuner candidates and more tiles
        timeout 150 python3 -m pytest -q -n 8 tests/test_nchw.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -8 | tee "$OUT/tests.log"
        T=implicit_gemm_tma_nchw
        for shape in 64,64,56,56,256,1,1,1,0,1,1,nobias 64,256,56,56,64,1,1,1,0,1,1,nobias \
                64,256,56,56,128,1,1,1,0,1,1,nobias 64,128,28,28,512,1,1,1,0,1,1,nobias \
                64,512,28,28,128,1,1,1,0,1,1,nobias 64,512,28,28,256,1,1,1,0,1,1,nobias \
                1,1024,48,48,1024,1,1,1,0,1,1 1,1536,48,48,512,1,1,1,0,1,1 1,768,96,96,256,1,1,1,0,1,1 \
                64,64,56,56,64,1,1,1,0,1,1,nobias; do
            echo "== $shape"
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 100 python3 tools/config_probe.py --layout nchw --shape $shape \
                --configs $T \
                --try "$T:block_m=128,block_n=256,num_warps=8,num_stages=3,tile_h=1,tile_w=256,persistent=0" \
                --try "$T:block_m=128,block_n=128,num_warps=8,num_stages=4,tile_h=1,tile_w=128,persistent=0" \
                --try "$T:block_m=128,block_n=128,num_warps=8,num_stages=4,tile_h=1,tile_w=128,persistent=1" \
                --try "$T:block_m=64,block_n=256,num_warps=4,num_stages=4,tile_h=1,tile_w=256,persistent=2" \
                --try "$T:block_m=128,block_n=64,num_warps=4,num_stages=4,tile_h=1,tile_w=64,persistent=0" \
                --try "$T:block_m=256,block_n=128,num_warps=8,num_stages=3,tile_h=1,tile_w=128,persistent=0" 2>&1
        done | tee "$OUT/nchwprobe.log" | grep -E "==|tuned|cudnn" ;;
    s32b)  # after the NCHW planes and the NCHW head: their GPU tests, the seg head probe, the NCHW suite
        timeout 150 python3 -m pytest -q -n 8 tests/test_nchw.py tests/test_repeat.py -k "nchw or head" \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "FAILED|Error|passed|failed" | tail -8 \
            | tee "$OUT/tests.log"
        for shape in 8,16,256,256,1,1,1 1,16,384,384,2,1,1; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 60 python3 tools/config_probe.py --layout nchw --shape $shape \
                --configs head_1x1_nchw --configs implicit_gemm_tma_nchw 2>&1
        done | tee "$OUT/headprobe.log" | grep -E "tuned|cudnn"
        bash "$0" nchw ;;
    s32c)  # the channels_last suite from empty caches
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-all.jsonl \
            timeout 330 python3 -m convgemm bench --dtype bf16 --check --suite all --json "$OUT/all.json" \
            > "$OUT/all.log" 2>&1
        echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3 ;;
    s32d)  # depthwise_nchw: its GPU tests, then the NCHW suite again
        timeout 200 python3 -m pytest -q -n 8 tests/test_nchw.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -8 | tee "$OUT/tests.log"
        bash "$0" nchw ;;
    s33a)  # ws3d's consumer partitions (192-pixel tiles) and the flat 1x1 view: GPU tests, then every ws candidate
        timeout 240 python3 -m pytest -q -n 8 tests/test_ws_consumers.py tests/test_conv3d.py -k "consumers or ws" \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "FAILED|Error|passed|failed" | tail -12 \
            | tee "$OUT/tests.log"
        for shape in 64,1024,14,14,256,1,1,1,0,1,1,nobias 64,1024,14,14,512,1,1,1,0,1,1,nobias \
            64,512,28,28,128,1,1,1,0,1,1,nobias 1,1024,48,48,1024,1,1,1,0,1,1 1,768,96,96,256,1,1,1,0,1,1 \
            1,256,192,192,256,3,3,1,1,1,1 1,128,192,192,256,3,3,1,1,1,1 1,512,48,48,1024,3,3,1,6,6,1; do
            x3="implicit_gemm_ws:block_m=64,block_n=128,block_k=64,num_warps=4,tile_n=1,persistent=1,parts=3"
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 100 python3 tools/config_probe.py --shape $shape \
                --configs implicit_gemm_ws --try "$x3,num_stages=4,tile_h=1,tile_w=64" \
                --try "$x3,num_stages=3,tile_h=1,tile_w=64" 2>&1 | grep -v Warning
        done | tee "$OUT/x3-probe.log" ;;
    s33b)  # the consumer partitions' GPU tests (call plans too), the Gluon launch tests, then the all suite cold
        timeout 200 python3 -m pytest -q -n 8 tests/test_ws_consumers.py tests/test_conv3d.py tests/test_gluon_launch.py \
            -k "consumers or ws or gluon" -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -16 | tee "$OUT/tests.log"
        bash "$0" s32c ;;
    s33c)  # x3 forms with 64 channels and x2 with 256, conv3_1 with a bias again, the NCHW suite, CRAFT compiled
        b="implicit_gemm_ws:block_m=64,block_k=64,num_warps=4,tile_n=1,tile_h=1,tile_w=64,persistent=1"
        for shape in 1,64,768,768,64,3,3,1,1,1,1 64,64,56,56,64,1,1,1,0,1,1,nobias 64,64,56,56,64,3,3,1,1,1,1,nobias \
            64,256,56,56,64,1,1,1,0,1,1,nobias 64,1024,14,14,256,1,1,1,0,1,1,nobias 1,128,192,192,256,3,3,1,1,1,1; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 80 python3 tools/config_probe.py --shape $shape \
                --try "$b,block_n=64,parts=3,num_stages=4" --try "$b,block_n=64,parts=3,num_stages=6" \
                --try "$b,block_n=128,parts=3,num_stages=4" --try "$b,block_n=256,parts=2,num_stages=3" 2>&1 \
                | grep -v -E "Warning|_tune"
        done | tee "$OUT/x3b-probe.log"
        NCHW_TIMEOUT=220 bash "$0" nchw
        timeout 200 python3 -m convgemm bench --model craft --dtype bf16 --modes "eager,compile,fused compile" \
            --json "$OUT/craft-compile.json" > "$OUT/craft-compile.log" 2>&1
        echo "craft compile: rc=$?"; grep -A1 "^craft" "$OUT/craft-compile.log" ;;
    s33d)  # strided outputs: ws stores into a stride phase, the tuner times on the output's strides; tests, dgrad
        timeout 120 python3 -m pytest -q -n 12 tests/test_ws_consumers.py tests/test_backward.py tests/test_tune_cache.py \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -12 \
            | tee "$OUT/tests.log"
        timeout 120 python3 -m pytest -q -n 3 tests/test_models.py -k 768 -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -6 | tee -a "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench dgrad 150 --suite resnet50 --direction dgrad ;;
    s35a)  # stream-K on the Gluon kernel (session 34, untimed): GPU tests, then its forms on the 98-tile layers
        # (and session 34's other untested GPU tests: strict fp32's strided dgrad tile, conv3d_ws in TF32)
        timeout 150 python3 -m pytest -q -n 12 tests/test_ws_consumers.py tests/test_backward.py tests/test_conv3d.py \
            tests/test_matmul.py -k "stream or strict_fp32 or tf32_every or default_tiles or tf32 or dgrad_tma" \
            -p no:cacheprovider \
            --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/tests.log"
        for shape in 64,512,14,14,512,3,3,2,1,1,1,nobias 64,512,7,7,512,3,3,1,1,1,1,nobias \
            64,256,14,14,256,3,3,1,1,1,1,nobias 64,256,28,28,256,3,3,2,1,1,1,nobias 64,2048,7,7,512,1,1,1,0,1,1,nobias; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 100 python3 tools/config_probe.py --shape $shape --stream
        done 2>&1 | tee "$OUT/stream-probe.log" ;;
    s35b)  # the TF32 all suite from empty caches (session 34 ran ResNet-50 and CRAFT only, after the Gluon kernel took TF32)
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-tf32-all.jsonl \
            timeout 560 python3 -m convgemm bench --dtype tf32 --check --suite all --direction fwd \
            --json "$OUT/tf32-all.json" > "$OUT/tf32-all.log" 2>&1
        echo "rc=$?"; grep -E "geom|FAIL|Error" "$OUT/tf32-all.log" | tail -4 ;;
    s35c)  # issue 9's Inductor target (last measured in session 5, floor suite): Inductor's max-autotune per layer
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 560 python3 -m convgemm bench --dtype bf16 --suite floor,resnet50 \
            --baseline cudnn,inductor --json "$OUT/inductor.json" > "$OUT/inductor.log" 2>&1
        echo "rc=$?"; grep -E "geom|FAIL|Error|inductor failed" "$OUT/inductor.log" | tail -6 ;;
    s35d)  # ResNet-50 dgrad with dgrad_tma tuned (session 34, untimed): its strided 3x3 layers were 0.75-0.85x
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-dgrad.jsonl timeout 400 python3 -m convgemm bench \
            --dtype bf16 --check --suite resnet50 --direction dgrad --json "$OUT/dgrad.json" > "$OUT/dgrad.log" 2>&1
        echo "rc=$?"; grep -E "geom|FAIL|Error" "$OUT/dgrad.log" | tail -4 ;;
    s35f)  # direct stores (session 35): GPU tests, then the direct forms in TF32 and bf16 on layers whose
        # 128 x 256 tile had 2 (TF32) or 3 (bf16) ring stages under the staging tile
        timeout 120 python3 -m pytest -q -n 12 tests/test_ws_consumers.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/tests.log"
        for job in tf32:64,512,14,14,512,3,3,2,1,1,1,nobias tf32:64,256,14,14,256,3,3,1,1,1,1,nobias \
            tf32:1,512,96,96,512,3,3,1,1,1,1 bf16:64,256,14,14,256,3,3,1,1,1,1,nobias bf16:1,128,384,384,128,3,3,1,1,1,1; do
            echo "== $job"
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 60 python3 tools/config_probe.py --shape "${job#*:}" --dtype "${job%%:*}" \
                --direct
        done 2>&1 | grep -v -E "Warning|_tune" | tee "$OUT/direct-probe.log"
        # two 128-pixel consumers under one 128-channel weight tile (256 pixels a tile: half the
        # weight reads from L2 per pixel) on the 128-channel strided layer (0.80x)
        b="implicit_gemm_ws:block_m=128,block_n=128,block_k=64,num_warps=8,tile_n=16,tile_h=4,tile_w=2,persistent=1"
        c="implicit_gemm_ws:block_m=128,block_n=128,block_k=64,num_warps=8,tile_n=8,tile_h=4,tile_w=4,persistent=1"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 90 python3 tools/config_probe.py --shape 64,128,56,56,128,3,3,2,1,1,1,nobias \
            --try "$b,parts=2,num_stages=3" --try "$b,parts=2,num_stages=4,direct=1" --try "$c,parts=2,num_stages=3" \
            --try "$c,parts=2,num_stages=4,direct=1" --try "$c,num_stages=4,direct=1" 2>&1 | grep -v -E "Warning|_tune" \
            | tee "$OUT/parts2-probe.log" ;;
    s35g)  # the TF32 all suite with the direct-store forms offered (fp32 only), then the Inductor template on the floor
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-tf32-all.jsonl timeout 270 python3 -m convgemm bench \
            --dtype tf32 --check --suite all --direction fwd --json "$OUT/tf32-all.json" > "$OUT/tf32-all.log" 2>&1
        echo "tf32 rc=$?"; grep -E "geom|FAIL|Error" "$OUT/tf32-all.log" | tail -3
        INDUCTOR_SUITE=floor INDUCTOR_TIMEOUT=290 bash "$0" s35e ;;
    s36a)  # session 35's untested bits: the refactored ws tests, the direct form in place of the staged one
        # (TF32 all suite: tuning time back near 1.3 s median?), then the Inductor template on ResNet-50
        timeout 120 python3 -m pytest -q -n 12 tests/test_ws_consumers.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/tests.log"
        bash "$0" s35b
        INDUCTOR_TIMEOUT=400 bash "$0" s35e ;;
    s39a)  # session 38: the ws consumer tests (session 35's refactor), the TF32 grouped suite from empty
        # caches (is grouped_ws picked in fp32, where its probe won?), then depthwise wgrad's floors
        timeout 120 python3 -m pytest -q -n 12 tests/test_ws_consumers.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-grouped-tf32.jsonl \
            timeout 260 python3 -m convgemm bench --dtype tf32 --check --suite grouped --direction fwd \
            --json "$OUT/grouped-tf32.json" > "$OUT/grouped-tf32.log" 2>&1
        echo "grouped tf32: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/grouped-tf32.log" | tail -3
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 180 python3 tools/dw_floor.py --wgrad 2>&1 | grep -v Warning \
            | tee "$OUT/dw-wgrad-floor.log" ;;
    s39b)  # session 38: the depthwise wgrad rows kernel's Gluon entry (compiles 3-4x faster on the CPU,
        # same instruction mix): GPU tests (both entries' bits), then the grouped wgrad suite from empty
        # caches with the Gluon entry and with the Triton one (first calls: 4.7-8.4 s on MobileNetV2's
        # strided layers in session 37; speed unchanged?)
        timeout 150 python3 -m pytest -q -n 12 tests/test_depthwise_gluon.py -p no:cacheprovider --tb=short -W ignore \
            2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/tests.log"
        for flag in 1 0; do
            CONVGEMM_DEPTHWISE_GLUON=$flag CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \
                CONVGEMM_TUNE_LOG=$OUT/tune-wgrad-gluon$flag.jsonl timeout 200 python3 -m convgemm bench --dtype bf16 \
                --check --suite grouped --direction wgrad --json "$OUT/wgrad-gluon$flag.json" \
                > "$OUT/wgrad-gluon$flag.log" 2>&1
            echo "grouped wgrad (CONVGEMM_DEPTHWISE_GLUON=$flag): rc=$?"; grep -E "geom|FAIL|Error" "$OUT/wgrad-gluon$flag.log" | tail -3
        done
        # where the small depthwise wgrads' 20-45 us go (the rows kernel against its reduce launch;
        # session 21: more programs per SM did not help 960 @7)
        for shape in 64,960,7,7,960,3,3,1,1,1,960 64,768,7,7,768,7,7,1,3,1,768 64,384,14,14,384,3,3,1,1,1,384; do
            timeout 60 python3 tools/profile_call.py --direction wgrad --shape $shape
        done 2>&1 | grep -v Warning > "$OUT/wgrad-profile.log"; tail -12 "$OUT/wgrad-profile.log" ;;
    s39c)  # issue 5's first-layer dgrad: CRAFT's conv1_1 (64 -> 3 channels at 768x768) was 1.67x in session 33,
        # 2x asked; its kernels' split (narrow_fold's R x 1 GEMM against the column fold) and every candidate's time
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-conv11-dgrad.jsonl timeout 120 python3 -m convgemm \
            bench --dtype bf16 --check --shape 1,3,768,768,64,3,3,1,1,1,1 --direction dgrad \
            --json "$OUT/conv11-dgrad.json" > "$OUT/conv11-dgrad.log" 2>&1
        echo "conv1_1 dgrad: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/conv11-dgrad.log" | tail -2
        timeout 90 python3 tools/profile_call.py --direction dgrad --shape 1,3,768,768,64,3,3,1,1,1,1 2>&1 \
            | grep -v Warning > "$OUT/conv11-profile.log"; head -14 "$OUT/conv11-profile.log" ;;
    s40b)  # session 39's convgemm.extend example (patch embeddings as the shared GEMM with its own loader),
        # registered by --plugin and tuned against the built-ins: ConvNeXt's stem and ViT-B/16's patch embedding
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 200 python3 -m convgemm bench --plugin examples/patchify_algorithm.py \
            --dtype bf16 --check --shape 64,3,224,224,96,4,4,4,0,1,1 --shape 64,3,224,224,768,16,16,16,0,1,1 \
            --json "$OUT/patchify.json" 2>&1 | grep -v Warning | tail -8 | tee "$OUT/patchify.log" ;;
    s41a)  # session 41: the depthwise wgrad window kernel (session 40's dw7 prototype as DepthwiseWgrad configs
        # with window > 0; compiled for sm_90 only): its GPU tests (both entries, three dtypes), then ConvNeXt-T's
        # four 7x7 wgrads from empty caches (the tuner times it against the rows kernel; cuDNN 130 us on 96 @56)
        timeout 170 python3 -m pytest -q -n 12 tests/test_depthwise_wgrad_window.py -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/window-tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-dw7-wgrad.jsonl timeout 150 python3 -m convgemm \
            bench --dtype bf16 --check --direction wgrad --shape 64,96,56,56,96,7,7,1,3,1,96 \
            --shape 64,192,28,28,192,7,7,1,3,1,192 --shape 64,384,14,14,384,7,7,1,3,1,384 \
            --shape 64,768,7,7,768,7,7,1,3,1,768 --json "$OUT/dw7-wgrad.json" > "$OUT/dw7-wgrad.log" 2>&1
        echo "ConvNeXt dw7 wgrad: rc=$?"; grep -vE "Warning" "$OUT/dw7-wgrad.log" | tail -10 ;;
    s42b)  # session 42: grouped_direct (ResNeXt's 4- and 8-channel groups on the CUDA cores, no block-diagonal
        # padding; Gluon entry, sm_90 167-168 registers): its GPU tests, then ResNeXt's three narrow-group layers
        # from empty caches (grouped_tma 0.92-1.12x cuDNN in session 37; prediction: 40-55 us on 128 @56, cuDNN 95)
        timeout 150 python3 -m pytest -q -n 12 tests/test_grouped_direct.py -p no:cacheprovider --tb=short -W ignore \
            2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/grouped-direct-tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-resnext.jsonl timeout 200 python3 -m convgemm \
            bench --dtype bf16 --check --shape 64,128,56,56,128,3,3,1,1,1,32,nobias \
            --shape 64,256,56,56,256,3,3,2,1,1,32,nobias --shape 64,256,28,28,256,3,3,1,1,1,32,nobias \
            --json "$OUT/resnext.json" > "$OUT/resnext.log" 2>&1
        echo "ResNeXt narrow groups: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/resnext.log" | tail -3
        grep -v '"tune"' "$OUT/tune-resnext.jsonl" | cut -c1-170 | tail -40 ;;
    s44a)  # session 44: head_1x1's stream form (TMA rows, programs walking tiles; lost 7-15% on an H100, removed) beside its pointer
        # tiles on the seg head 16->1 (10.0 us in session 37, 2x cuDNN needs 9.9) and CRAFT's two 1x1 heads,
        # from empty caches (--check), the tuner log split stream / pointer, the head GPU tests, then s43a
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench heads "${HEADS_TIMEOUT:-90}" --shape 8,16,256,256,1,1,1,1,0,1,1 \
            --shape 1,16,384,384,2,1,1,1,0,1,1 --shape 1,16,384,384,16,1,1,1,0,1,1
        python3 tools/tune_log_summary.py "$OUT/tune.jsonl" --split "head_1x1 .* p[0-9]"
        timeout 90 python3 -m pytest -q -n 8 tests/test_conv2d.py -k "head" -p no:cacheprovider --tb=short -W ignore \
            2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/head-tests.log"
        bash "$0" s43a ;;
    s45a)  # session 44's untimed grouped_tma persistent tiles (persistent_gemm_kernel over every super-group) and
        # grouped_direct's two candidates: ResNeXt's seven layers from empty caches, the tuner log split persistent /
        # one tile a program, then the persistent and PDL GPU tests
        RESNEXT_LAYERS=${RESNEXT_LAYERS:-} TESTS_TIMEOUT=0 bash "$0" s43a
        python3 tools/tune_log_summary.py "$OUT/tune.jsonl" --split "grouped_tma .* p[12]"
        timeout 100 python3 -m pytest -q -n 4 tests/test_nonfinite.py tests/test_launch.py tests/test_grouped_direct.py \
            -k "listed or pdl or persistent or gpu" -p no:cacheprovider --tb=short -W ignore 2>&1 |
            grep -E "^E  |FAILED|Error|passed|failed" | tail -8 ;;
    s49a)  # after session 48's PDL policy (rows kernel's reduce plain, window kernel's dependent for <= 9 taps,
        # wgrad_ws triggered at each program's last unit): the grouped and ResNet-50 wgrad suites, PDL 1 / 0 / 1 in
        # alternating processes on one tuning cache (no layer should now lose with PDL on), then the depthwise GPU
        # tests that the 90 s timeouts cut in session 48
        for suite in ${PDL_SUITES:-grouped resnet50}; do
            d=$(mktemp -d); i=0
            for p in 1 0 1; do
                i=$((i+1)); t=${PDL_BENCH_TIMEOUT:-60}; [ $i = 1 ] && t=${PDL_TUNE_TIMEOUT:-140}
                CONVGEMM_CACHE_DIR=$d CONVGEMM_PDL=$p timeout "$t" python3 -m convgemm bench --dtype bf16 --check \
                    --suite $suite --direction wgrad --json "$OUT/$suite-wgrad-pdl$p-$i.json" \
                    > "$OUT/$suite-wgrad-pdl$p-$i.log" 2>&1
                echo "$suite PDL=$p run $i: rc=$?"; grep -E "geom" "$OUT/$suite-wgrad-pdl$p-$i.log" | tail -1
            done
        done
        [ "${PDL_TESTS_TIMEOUT:-200}" = 0 ] || timeout "${PDL_TESTS_TIMEOUT:-200}" python3 -m pytest -q -n 8 tests/test_depthwise_wgrad_window.py \
            tests/test_backward.py tests/test_launch.py -k "gpu_window_both or depthwise_wgrad_gpu_configs or pdl or dependent" \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | tee "$OUT/s49a-tests.log" \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 ;;
    s49b)  # why a dependent reduce cost ~6 us on some depthwise wgrads (session 48): torch.profiler per-kernel
        # times with the reduce forced dependent and plain, on a losing 7x7 window layer, a winning 3x3 window
        # layer and a losing strided rows layer (forced on there, the rows kernel has no trigger: the reduce
        # starts as its programs exit, which isolates the launch mode's own cost); one tuning cache
        d=$(mktemp -d)
        for shape in 64,192,28,28,192,7,7,1,3,1,192 64,576,14,14,576,3,3,1,1,1,576 64,192,28,28,192,3,3,2,1,1,192; do
            for mode in on off on off; do
                echo "== $shape --dw-reduce-pdl $mode"
                CONVGEMM_CACHE_DIR=$d timeout 60 python3 tools/profile_call.py --direction wgrad --shape $shape \
                    --calls 50 --dw-reduce-pdl $mode 2>&1 | grep -E "us/call|depthwise|wgrad_reduce|Self CUDA|span"
            done
        done 2>&1 | tee "$OUT/s49b-dw-pdl-profile.log" ;;
    s49c)  # session 49: s49b's per-kernel times showed the dependent reduce's own time at 13.0 against 3.1 us
        # on the 7x7 192 @28 (its wait counted) and equal on 3x3: the call's GPU span (tools/profile_call.py's
        # span lines) tells whether the whole call is longer. Then ws_conv3d_kernel's trigger moved from the
        # kernel's start to each program's last unit: the forward K split A/B (PDL 1/0 alternating, as s47pdl's
        # pdlf rows: 0.7 us gained on 16,512,7,7 with the trigger first, none on 1,512,48,48) and its GPU tests
        d=$(mktemp -d)
        for shape in 64,192,28,28,192,7,7,1,3,1,192 64,576,14,14,576,3,3,1,1,1,576; do
            for mode in on off on off; do
                echo "== $shape --dw-reduce-pdl $mode"
                CONVGEMM_CACHE_DIR=$d timeout 60 python3 tools/profile_call.py --direction wgrad --shape $shape \
                    --calls 50 --dw-reduce-pdl $mode 2>&1 | grep -E "us/call|span"
            done
        done 2>&1 | tee "$OUT/s49c-dw-pdl-spans.log"
        for round in 1 2; do
            for pdl in 1 0; do
                t=${PDL_BENCH_TIMEOUT:-90}
                CONVGEMM_CACHE_DIR=$d CONVGEMM_PDL=$pdl timeout "$t" python3 -m convgemm bench \
                    --dtype bf16 --check --shape 16,512,7,7,512,3,3,1,0,1,1 --shape 1,512,48,48,256,3,3,1,1,1,1 \
                    --shape 64,512,7,7,512,3,3,1,1,1,1,nobias \
                    --json "$d/pdlf$pdl-r$round.json" >> "$OUT/pdl-bench.log" 2>&1
                echo "PDL=$pdl round $round fwd: rc=$?"
            done
        done
        pdl_summary "$d"
        timeout "${PDL_TESTS_TIMEOUT:-200}" python3 -m pytest -q -n 8 tests/test_launch.py tests/test_grouped_ws.py \
            tests/test_gluon_launch.py tests/test_split_k.py -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | tee "$OUT/s49c-tests.log" | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 ;;
    s48a|s48c)  # session 48: s47pdl (H100) found PDL 5-6 us slower on the depthwise window wgrads with the
        # trigger first, and 1.5 us slower on one 3x3 wgrad_ws layer. s48a: the depthwise trigger after the main
        # loop; A/B on those and four 3x3 wgrad_ws layers, the all suite cold, tests. s48c: wgrad_ws's consumer
        # triggers at its last unit; A/B on three 3x3 and three 1x1 wgrad_ws layers, its GPU tests, the NCHW suite
        d=$(mktemp -d)
        if [ "$1" = s48a ]; then
            shapes=(--shape 64,960,7,7,960,3,3,1,1,1,960 --shape 64,576,14,14,576,3,3,1,1,1,576
                    --shape 64,768,7,7,768,7,7,1,3,1,768 --shape 64,256,14,14,256,3,3,1,1,1,1,nobias
                    --shape 64,128,28,28,128,3,3,1,1,1,1,nobias --shape 64,512,7,7,512,3,3,1,1,1,1,nobias
                    --shape 64,64,56,56,64,3,3,1,1,1,1,nobias)
        else
            shapes=(--shape 64,256,14,14,256,3,3,1,1,1,1,nobias --shape 64,128,28,28,128,3,3,1,1,1,1,nobias
                    --shape 64,64,56,56,64,3,3,1,1,1,1,nobias --shape 64,256,14,14,1024,1,1,1,0,1,1,nobias
                    --shape 64,512,28,28,128,1,1,1,0,1,1,nobias --shape 1,768,96,96,256,1,1,1,0,1,1)
        fi
        for round in 1 2; do
            for pdl in 1 0; do
                t=${PDL_BENCH_TIMEOUT:-70}; [ "$round$pdl" = 11 ] && t=${PDL_TUNE_TIMEOUT:-150}
                CONVGEMM_CACHE_DIR=$d CONVGEMM_PDL=$pdl timeout "$t" python3 -m convgemm bench \
                    --dtype bf16 --check --direction wgrad "${shapes[@]}" --json "$d/pdlw$pdl-r$round.json" \
                    >> "$OUT/pdl-bench.log" 2>&1
                echo "PDL=$pdl round $round: rc=$?"
            done
        done
        pdl_summary "$d"
        if [ "$1" = s48c ]; then
            timeout "${PDL_TESTS_TIMEOUT:-100}" python3 -m pytest -q -n 8 tests/test_ws_wgrad.py -k "wgrad_ws_2d" \
                -p no:cacheprovider --tb=short -W ignore 2>&1 | tee "$OUT/s48c-tests.log" \
                | grep -E "^E  |FAILED|Error|passed|failed" | tail -8
            NCHW_TIMEOUT=${NCHW_TIMEOUT:-280} bash "$0" nchw
        else
            CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/all-tune.jsonl \
                timeout "${ALL_TIMEOUT:-330}" python3 -m convgemm bench --dtype bf16 --check --suite all \
                --json "$OUT/all.json" > "$OUT/all.log" 2>&1
            echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3
            timeout "${PDL_TESTS_TIMEOUT:-90}" python3 -m pytest -q -n 8 tests/test_depthwise_wgrad_window.py \
                tests/test_backward.py -k "gpu_window_both or depthwise_wgrad_gpu_configs" -p no:cacheprovider \
                --tb=short -W ignore 2>&1 | tee "$OUT/s48a-tests.log" | grep -E "^E  |FAILED|Error|passed|failed" | tail -8
        fi ;;
    s47pdl)  # session 47: the split wgrads' finish kernels as programmatic dependent launches (wgrad_ws's
        # ws_wgrad_finish_kernel, wgrad_tma's split_k_finish_kernel): their GPU tests, then CONVGEMM_PDL A/B
        # on seven split wgrad layers (one tuning cache, tuned by the first process; two rounds of
        # alternating processes; the depthwise wgrads' reduce and the forward's Gluon K split too) -> s47pdl-tests.log,
        # pdl-bench.log, pdl-summary.log, pdl-all.json (each process's JSON by name)
        timeout "${PDL_TESTS_TIMEOUT:-100}" python3 -m pytest -q -n 8 tests/test_launch.py tests/test_ws_wgrad.py \
            tests/test_backward.py tests/test_depthwise_wgrad_window.py \
            -k "dependent or pdl or wgrad_ws_2d or reduce_plan or gpu_window_both or depthwise_wgrad_gpu_configs" \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | tee "$OUT/s47pdl-tests.log" |
            grep -E "^E  |FAILED|Error|passed|failed" | tail -8
        d=$(mktemp -d)
        shapes=(--shape 64,256,14,14,1024,1,1,1,0,1,1,nobias --shape 64,512,28,28,128,1,1,1,0,1,1,nobias
                --shape 64,256,14,14,256,3,3,1,1,1,1,nobias --shape 1,768,96,96,256,1,1,1,0,1,1
                --shape 1,16,384,384,16,1,1,1,0,1,1 --shape 64,960,7,7,960,3,3,1,1,1,960
                --shape 64,576,14,14,576,3,3,1,1,1,576 --shape 64,768,7,7,768,7,7,1,3,1,768)
        for round in 1 2; do
            for pdl in 1 0; do
                # the first process tunes (PDL_TUNE_TIMEOUT), the others time the cached choices
                t=${PDL_BENCH_TIMEOUT:-150}; [ "$round$pdl" = 11 ] && t=${PDL_TUNE_TIMEOUT:-$t}
                CONVGEMM_CACHE_DIR=$d CONVGEMM_PDL=$pdl timeout "$t" python3 -m convgemm bench \
                    --dtype bf16 --check --direction wgrad "${shapes[@]}" --json "$d/pdlw$pdl-r$round.json" \
                    >> "$OUT/pdl-bench.log" 2>&1
                echo "PDL=$pdl round $round: rc=$?"
                # the forward layers on implicit_gemm_ws's K split (session 37's all suite); PDL_FWD=0 skips them
                [ "${PDL_FWD:-1}" = 0 ] && continue
                CONVGEMM_CACHE_DIR=$d CONVGEMM_PDL=$pdl timeout "${PDL_BENCH_TIMEOUT:-150}" python3 -m convgemm bench \
                    --dtype bf16 --check --shape 16,512,7,7,512,3,3,1,0,1,1 --shape 1,512,48,48,256,3,3,1,1,1,1 \
                    --json "$d/pdlf$pdl-r$round.json" >> "$OUT/pdl-bench.log" 2>&1
                echo "PDL=$pdl round $round fwd: rc=$?"
            done
        done
        pdl_summary "$d"
        ;;
    s44c)  # CONVGEMM_PDL A/B (session 44, H100: PDL=1 2.2-4.2% faster, now the default; the grouped fix-up as a programmatic dependent launch; ncu, s44b: the fix-up launch
        # 3.8 us beside a 26 us main kernel on 512 @14): ResNeXt's grouped_tma layers, one tuning cache, two rounds
        # of alternating processes, then the PDL GPU tests
        d=$(mktemp -d)
        shapes=(--shape 64,256,56,56,256,3,3,2,1,1,32,nobias --shape 64,256,28,28,256,3,3,1,1,1,32,nobias
                --shape 64,512,28,28,512,3,3,2,1,1,32,nobias --shape 64,512,14,14,512,3,3,1,1,1,32,nobias)
        for round in 1 2; do
            for pdl in 0 1; do
                CONVGEMM_CACHE_DIR=$d CONVGEMM_PDL=$pdl timeout 100 python3 -m convgemm bench --dtype bf16 --check \
                    "${shapes[@]}" --json "$OUT/pdl$pdl-r$round.json" > /dev/null 2>&1
                echo "PDL=$pdl round $round: rc=$?"
            done
        done
        python3 - "$OUT" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/pdl*.json")):
    d = json.load(open(f))
    rows = d["rows"] if isinstance(d, dict) else d
    print(f.split("/")[-1], " ".join(f"{r['convgemm_us']:.1f}/{r['cudnn_us']:.1f}" for r in rows),
          rows[0]["algorithm"], rows[0]["config"])
PY
        timeout 100 python3 -m pytest -q -n 4 tests/test_nonfinite.py tests/test_launch.py -k "listed or pdl" \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 ;;
    s44b)  # what binds ResNeXt's 16- and 32-channel groups (0.82x and 1.0x, H200 s37; 6 and 3 us of memory
        # floor against 20-30 us; session 26: cutting the wasted products did not help): Nsight Compute on
        # cuDNN and the tuned convgemm kernel of 512 @14 and 1024 @7
        NCU_ARGS="--shape 64,512,14,14,512,3,3,1,1,1,32,nobias --shape 64,1024,7,7,1024,3,3,1,1,1,32,nobias" \
            bash "$0" ncu ;;
    s43a)  # session 43: grouped_direct with row-fastest strips (untimed) and 8 x 8 groups split over 4 threads
        # (new): ResNeXt-50's seven grouped 3x3 layers forward from empty caches (the tuner log has every
        # candidate; --check compares each output with cuDNN's; last full run: session 37, H200), then its GPU tests
        shapes=()
        # RESNEXT_LAYERS="128,56,1 256,28,1" picks layers (width,size,stride); TESTS_TIMEOUT=0 skips the tests
        for l in ${RESNEXT_LAYERS:-128,56,1 256,56,2 256,28,1 512,28,2 512,14,1 1024,14,2 1024,7,1}; do
            IFS=, read -r c hw st <<< "$l"
            shapes+=(--shape "64,$c,$hw,$hw,$c,3,3,$st,1,1,32,nobias")
        done
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench resnext "${RESNEXT_TIMEOUT:-200}" "${shapes[@]}"
        python3 tools/tune_log_summary.py "$OUT/tune.jsonl" --split grouped_direct --split grouped_tma
        [ "${TESTS_TIMEOUT:-150}" = 0 ] ||
            timeout "${TESTS_TIMEOUT:-150}" python3 -m pytest -q -n 12 tests/test_grouped_direct.py -k gpu -p no:cacheprovider \
                --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/grouped-direct-tests.log" ;;
    grouped-fwd) bench grouped "${GROUPED_TIMEOUT:-240}" --suite grouped --direction fwd ;;
    grouped-wgrad) bench grouped-wgrad "${GROUPED_TIMEOUT:-240}" --suite grouped --direction wgrad ;;
    s42d)  # s42c without the grouped wgrad suite (device budget): grouped_direct's GPU tests, ResNeXt 128 @56
        timeout 120 python3 -m pytest -q -n 12 tests/test_grouped_direct.py -k gpu -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/grouped-direct-tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-resnext.jsonl timeout 100 python3 -m convgemm \
            bench --dtype bf16 --check --shape 64,128,56,56,128,3,3,1,1,1,32,nobias --json "$OUT/resnext.json" \
            > "$OUT/resnext.log" 2>&1
        echo "ResNeXt 128 @56: rc=$?"; grep -v '"tune"' "$OUT/tune-resnext.jsonl" | cut -c60-170 ;;
    s42c)  # after s42b (grouped_direct 112-165 us, 2x slower than predicted, lost to grouped_tma everywhere): word
        # loads (4 bf16 channels in 8 bytes), a run-time filter-row loop (952 instructions a thread, was 2296),
        # 8x8 groups refused (spilled): its GPU tests, ResNeXt 128 @56 from empty caches (grouped_tma 99.6 us,
        # cuDNN 96 on this H100), then the grouped suite's wgrad (the 3x3 window kernel first on stride-1 layers)
        timeout 150 python3 -m pytest -q -n 12 tests/test_grouped_direct.py -p no:cacheprovider --tb=short -W ignore \
            2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/grouped-direct-tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-resnext.jsonl timeout 100 python3 -m convgemm \
            bench --dtype bf16 --check --shape 64,128,56,56,128,3,3,1,1,1,32,nobias --json "$OUT/resnext.json" \
            > "$OUT/resnext.log" 2>&1
        echo "ResNeXt 128 @56: rc=$?"; grep -v '"tune"' "$OUT/tune-resnext.jsonl" | cut -c60-170
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-grouped-wgrad.jsonl timeout 200 python3 -m convgemm \
            bench --dtype bf16 --check --suite grouped --direction wgrad --json "$OUT/grouped-wgrad.json" \
            > "$OUT/grouped-wgrad.log" 2>&1
        echo "grouped wgrad: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/grouped-wgrad.log" | tail -3 ;;
    s42a)  # session 42: the window kernel offered for 3x3 (MobileNetV2's stride-1 layers; sm_90 80-96 registers):
        # its GPU tests on 7x7 and 3x3 layers, then the six stride-1 3x3 wgrads from empty caches (the tuner
        # times it against the rows kernel: 0.83-1.16x cuDNN in session 38; the read floor allows 1.32-1.95x)
        timeout 220 python3 -m pytest -q -n 14 tests/test_depthwise_wgrad_window.py -k gpu_window -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/window-tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-dw3-wgrad.jsonl timeout 150 python3 -m convgemm \
            bench --dtype bf16 --check --direction wgrad --shape 64,32,112,112,32,3,3,1,1,1,32,nobias \
            --shape 64,144,56,56,144,3,3,1,1,1,144,nobias --shape 64,192,28,28,192,3,3,1,1,1,192,nobias \
            --shape 64,384,14,14,384,3,3,1,1,1,384,nobias --shape 64,576,14,14,576,3,3,1,1,1,576,nobias \
            --shape 64,960,7,7,960,3,3,1,1,1,960,nobias --json "$OUT/dw3-wgrad.json" > "$OUT/dw3-wgrad.log" 2>&1
        echo "MobileNetV2 dw3 wgrad: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/dw3-wgrad.log" | tail -3
        grep -v '"tune"' "$OUT/tune-dw3-wgrad.jsonl" | cut -c1-160 | tail -30 ;;
    s41c)  # after s41a (the window kernel won all four ConvNeXt 7x7 wgrads; its GPU tests ran past 170 s): the
        # tests with the Triton entry in bf16 only, the fixed strided-bias test, the four layers again from
        # empty caches with the pruned candidates (first calls: 96 @56's was 4.8 s with five candidates)
        # (the file's other tests, run on the GPU, compile the Triton entry for NCHW and odd tiles: about
        # 60 s each on that host; they run under the interpreter in CI)
        timeout 200 python3 -m pytest -q -n 12 tests/test_depthwise_wgrad_window.py -k gpu_window -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/window-tests.log"
        timeout 60 python3 -m pytest -q tests/test_conv2d.py -k strided_bias -p no:cacheprovider --tb=short -W ignore \
            2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -4
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-dw7-wgrad.jsonl timeout 120 python3 -m convgemm \
            bench --dtype bf16 --check --direction wgrad --shape 64,96,56,56,96,7,7,1,3,1,96 \
            --shape 64,192,28,28,192,7,7,1,3,1,192 --shape 64,384,14,14,384,7,7,1,3,1,384 \
            --shape 64,768,7,7,768,7,7,1,3,1,768 --json "$OUT/dw7-wgrad.json" > "$OUT/dw7-wgrad.log" 2>&1
        echo "ConvNeXt dw7 wgrad: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/dw7-wgrad.log" | tail -3 ;;
    s41b)  # the small-channel dgrad suite with the row ring on by default (session 40; the README's 2.16x is
        # session 21's, before the ring): from empty caches, tuner log kept
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-small-dgrad.jsonl timeout 300 python3 -m convgemm \
            bench --dtype bf16 --check --suite small-channel --direction dgrad --json "$OUT/small-dgrad.json" \
            > "$OUT/small-dgrad.log" 2>&1
        echo "small-channel dgrad: rc=$?"; grep -vE "Warning" "$OUT/small-dgrad.log" | tail -18 ;;
    s40f)  # session 39's fixes on the GPU (strided bias, broadcast inputs off TMA, transpose output_padding),
        # a fuzz of many small shards (aligned ones included)
        timeout 80 python3 -m pytest -q -n 14 tests/test_conv2d.py tests/test_transpose.py -k "strided_bias or broadcast \
            or transpose" -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" \
            | tail -10 | tee "$OUT/tests.log"
        timeout 60 python3 -m pytest -q tests/test_row_ring.py -k gpu_narrow -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -6 | tee "$OUT/ring-tests.log"
        CONVGEMM_AUTOTUNE=0 CONVGEMM_FUZZ_EXAMPLES=112 CONVGEMM_FUZZ_EXAMPLES_ALIGNED=112 CONVGEMM_FUZZ_SHARDS=28 \
            CONVGEMM_FUZZ_EXAMPLES_3D=8 CONVGEMM_FUZZ_EXAMPLES_T=6 CONVGEMM_FUZZ_SEED=${FUZZ_SEED:-40} \
            timeout "${FUZZ_TIMEOUT:-130}" python3 -m pytest -v -n 14 tests/test_fuzz.py -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "PASSED|FAILED|Falsifying|^E  |passed|failed" > "$OUT/fuzz.log"
        echo "fuzz: $(grep -c PASSED "$OUT/fuzz.log") tests passed"; grep -vE "PASSED" "$OUT/fuzz.log" | tail -30
        # (its third part, the dw7 prototype's probe, is gone with the prototype: s41a timed the library kernel)
        ;;
    s40a)  # the row-ring R x 1 convolution (session 38, compiled for sm_90 on the CPU only): its GPU tests,
        # then its time on conv1_1's reduced dgrad against narrow_fold (the GEMM step was 47.7 us)
        timeout 150 python3 -m pytest -q -n 12 tests/test_row_ring.py tests/test_extend.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/tests.log"
        timeout 150 python3 tools/row_ring_probe.py 2>&1 | grep -v Warning | tee "$OUT/row-ring-probe.log"
        # issue 5's first-layer dgrad (2x cuDNN asked; 1.67x in session 33): conv1_1 tuned without, then with
        # the ring among narrow_fold's candidates
        for ring in 0 1; do
            CONVGEMM_ROW_RING=$ring CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 -m convgemm bench --dtype bf16 \
                --check --shape 1,3,768,768,64,3,3,1,1,1,1 --direction dgrad --json "$OUT/conv11-dgrad-ring$ring.json" \
                2>&1 | grep -v Warning | tail -6 | tee "$OUT/conv11-dgrad-ring$ring.log"
        done ;;
    s38a)  # session 37: depthwise layers on the rows kernel's Gluon entry (the coalescing pass skipped at
        # compile time, same sm_90 SASS on the CPU): GPU tests, then the grouped suite from empty caches
        # (first-call tuning: ConvNeXt's 7x7 layers took 3.3-4.1 s in session 33, the target is 3 s)
        timeout 150 python3 -m pytest -q -n 12 tests/test_depthwise_gluon.py tests/test_depthwise.py tests/test_conv2d.py \
            tests/test_large.py -k "depthwise or rows or dw or entries" -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-grouped-gluon.jsonl \
            timeout 230 python3 -m convgemm bench --dtype bf16 --check --suite grouped --direction fwd \
            --json "$OUT/grouped-gluon.json" > "$OUT/grouped-gluon.log" 2>&1
        echo "grouped (Gluon entry): rc=$?"; grep -E "geom|FAIL|Error" "$OUT/grouped-gluon.log" | tail -3 ;;
    s38b)  # the same suite with the Triton entry everywhere (CONVGEMM_DEPTHWISE_GLUON=0): first calls and speed
        CONVGEMM_DEPTHWISE_GLUON=0 CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \
            CONVGEMM_TUNE_LOG=$OUT/tune-grouped-triton.jsonl timeout 230 python3 -m convgemm bench --dtype bf16 \
            --check --suite grouped --direction fwd --json "$OUT/grouped-triton.json" > "$OUT/grouped-triton.log" 2>&1
        echo "grouped (Triton entry): rc=$?"; grep -E "geom|FAIL|Error" "$OUT/grouped-triton.log" | tail -3 ;;
    s58n)  # session 58: why a 64 x 128 ws tile at one program an SM runs at 2/3 of a 64 x 256 tile's rate (s57h: 60.8
        # against 40.5 us on l4 3x3 (first)): both tiles and cuDNN under ncu on l4 3x3 @7 and l4 3x3 (first), the
        # tensor pipe's activity, issue and the warp stall reasons -> tile-details.csv, ncu-tile.log
        t="implicit_gemm_ws:block_m=64,block_k=64,num_warps=4,num_stages=4,tile_n=64,tile_h=1,tile_w=1"
        t="$t,parts=1,stack=0,direct=0,split_k=1,stream_k=0,persistent=1"
        ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        CONVGEMM_AUTOTUNE=0 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 240 "$ncu_bin" --clock-control none \
            --profile-from-start off --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
            --section ComputeWorkloadAnalysis \
            --section MemoryWorkloadAnalysis -o "$OUT/tile" \
            python3 tools/ncu_probe.py --shape 64,512,7,7,512,3,3,1,1,1,1,nobias --shape 64,512,14,14,512,3,3,2,1,1,1,nobias \
            --try "$t,block_n=256" --try "$t,block_n=128" > "$OUT/ncu-tile.log" 2>&1
        echo "ncu: rc=$?"; grep -E "^  [a-z_0-9]+.*\(|Duration" "$OUT/ncu-tile.log" | head -20
        "$ncu_bin" --import "$OUT/tile.ncu-rep" --page details --csv > "$OUT/tile-details.csv" 2>&1
        echo "details: rc=$? $(wc -l < "$OUT/tile-details.csv") lines"
        python3 - "$OUT/tile-details.csv" <<'PY'
import csv, sys
keep = ("Duration", "Compute (SM) Throughput", "Executed Ipc Active", "Issue Slots Busy", "No Eligible",
        "Warp Cycles Per Issued Instruction", "Registers Per Thread", "Memory Throughput", "L2 Hit Rate",
        "DRAM Throughput", "Active Warps Per Scheduler", "Eligible Warps Per Scheduler")
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14]
for r in rows[1:]:
    if r[12] in keep:
        print(r[0], r[4][:110], r[12], r[13], r[14], sep=" | ")
PY
        "$ncu_bin" --import "$OUT/tile.ncu-rep" --page raw --csv > "$OUT/tile-raw.csv" 2>&1
        python3 - "$OUT/tile-raw.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
cols = [i for i, h in enumerate(head) if h.startswith("smsp__average_warps_issue_stalled_") and h.endswith("_per_issue_active.ratio")]
cols += [i for i, h in enumerate(head) if "pipe_tensor" in h and "pct" in h]
for r in rows[2:]:
    if len(r) != len(head):
        continue
    vals = [(head[i].replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""), r[i]) for i in cols]
    vals = [(k, v) for k, v in vals if v and v.replace(".", "", 1).isdigit() and float(v) >= 0.05]
    print(r[head.index("Kernel Name")][:40], *(f"{k}={v}" for k, v in vals))
PY
        ;;
    s59)  # session 59's first call (about 5 minutes): session 58's producer change (ws3d / ws_wgrad carry their K-step
        # indices; compiled and emulated only) -- its GPU tests first, then the timings it predicts (s58d, s56a) and
        # ncu on the tiles again (s58n) -> ws-tests.log, deep128.log, deep-stages.log, ncu-tile.log
        timeout "${WS_TESTS_TIMEOUT:-200}" python3 -m pytest -q -n 12 tests/test_ws_consumers.py tests/test_ws_wgrad.py \
            tests/test_grouped_ws.py tests/test_gluon_launch.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/ws-tests.log"
        bash "$0" s58d
        bash "$0" s56a
        bash "$0" s58n ;;
    s59b)  # session 59's second call (about 9 minutes): after the producer change held on the GPU (s59: ws tests
        # passed; the 64 x 256 tile under ncu 27.4 / 29.3 us against cuDNN 30.3 / 30.9 on the H100), what the tuner
        # makes of it -- the all suite from empty caches (s38c), then ResNet-50's wgrad suite from an empty cache
        bash "$0" s38c
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench wgrad-resnet50 "${WGRAD_TIMEOUT:-200}" --suite resnet50 --direction wgrad ;;
    s59c)  # session 59: the producer change made the 64 x 128 ws tile's ring depth matter (s59, H100: 51.5 / 42.3 /
        # 37.5 us at 4 / 6 / 8 stages on l4 3x3 (first), 60.2 / 60.3 / 59.8 before on the H200); the 1x1 layers under
        # 0.95x (s59b: l4 1x1 reduce @7 0.86x on gemm_1x1, l3 1x1 reduce @14 0.92x, l4 1x1 reduce (first) @14 0.93x)
        # with 64 x 128 at 4 / 6 / 8 stages, unsplit and as the hybrid, against 64 x 256 -> deep1x1.log
        t="implicit_gemm_ws:block_m=64,num_warps=4,tile_n=1,tile_h=1,tile_w=64,parts=1,stack=0,split_k=1,block_k=64,direct=0"
        t="$t,persistent=1"
        for shape in 64,2048,7,7,512,1,1,1,0,1,1,nobias 64,1024,14,14,256,1,1,1,0,1,1,nobias \
                64,1024,14,14,512,1,1,1,0,1,1,nobias; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --shape $shape \
                --try "$t,block_n=256,num_stages=4,stream_k=0" --try "$t,block_n=128,num_stages=4,stream_k=0" \
                --try "$t,block_n=128,num_stages=6,stream_k=0" --try "$t,block_n=128,num_stages=8,stream_k=0" \
                --try "$t,block_n=128,num_stages=8,stream_k=2" --try "$t,block_n=128,num_stages=6,stream_k=2" 2>&1 \
                | grep -v Warning
        done | tee "$OUT/deep1x1.log" ;;
    s59d)  # session 59: does the three-consumer 192 x 128 tile (the tuner's pick on most ResNet-50 layers) gain from a
        # deeper ring now that the 64 x 128 one does (s59c)? At 4 stages (the pick), 5 direct, block_k 32 at 8 staged
        # and 9 direct, on the layers under 0.95x it holds (l3 1x1 reduce @14, l4 1x1 reduce (first) @14, l2 3x3
        # (first) @56 s2) and one it wins (l3 3x3 @14) -> deep-x3.log
        for spec in "64,1024,14,14,256,1,1,1,0,1,1,nobias tile_n=1,tile_h=1,tile_w=64,stack=0" \
                "64,1024,14,14,512,1,1,1,0,1,1,nobias tile_n=1,tile_h=1,tile_w=64,stack=0" \
                "64,128,56,56,128,3,3,2,1,1,1,nobias tile_n=4,tile_h=4,tile_w=4,stack=1" \
                "64,256,14,14,256,3,3,1,1,1,1,nobias tile_n=16,tile_h=2,tile_w=2,stack=1"; do
            t="implicit_gemm_ws:block_m=64,block_n=128,num_warps=4,persistent=1,parts=3,split_k=1,stream_k=0,${spec#* }"
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --shape "${spec%% *}" \
                --try "$t,block_k=64,num_stages=4,direct=0" --try "$t,block_k=64,num_stages=5,direct=1" \
                --try "$t,block_k=32,num_stages=8,direct=0" --try "$t,block_k=32,num_stages=9,direct=1" 2>&1 \
                | grep -v Warning
        done | tee "$OUT/deep-x3.log" ;;
    s59e)  # session 59's last call (about 5 minutes): s59d, then the grouped suite from empty caches after the tuner
        # left the pointer 'grouped' kernel out of 16-bit NHWC ResNeXt layers (first calls, picks) -> grouped.json
        bash "$0" s59d
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench grouped "${GROUPED_TIMEOUT:-200}" --suite grouped ;;
    s60d)  # session 60's second call (about 8 minutes): s38c (the all suite from empty caches: Ws3d.deep_ring in the
        # tuner), then ResNet-50 dgrad from an empty cache (last timed in session 35, 1.03x on the H200, before the ws
        # forward tiles that stride-1 dgrad runs on) -> all.json, all-tune.jsonl, dgrad-resnet50.json
        bash "$0" s38c
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench dgrad-resnet50 "${DGRAD_TIMEOUT:-220}" --suite resnet50 --direction dgrad ;;
    s62g)  # for session 62 (about 3 minutes): the grouped suite from empty caches after session 61's two candidate prunes
        # (grouped_tma without 64 x 256 at 3 stages in 16-bit, grouped_direct's widest block only): ResNeXt 128 @56 as
        # the process's first shape took 3.99 s in session 60 (prediction: under 3.3 s), the picks -> grouped.json
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench grouped "${GROUPED_TIMEOUT:-200}" --suite grouped ;;
    s62d)  # for session 62: ResNet-50's strided 3x3 dgrads (dgrad_tma 0.79-0.81x, s60). Not L2 traffic: in s60's tuner
        # log 128 x 256 (11.7 KB from L2 a MFLOP) took about what 64 x 128 (24.6 KB) took, and 128 x 128 at 4 stages (one
        # program an SM) was 1.3-1.4x slower. Occupancy then: wide tiles at 2-3 stages (65-98 KB, 2-3 programs an SM;
        # sm_90: no spills) -> dgrad-lean.log
        CONVGEMM_AUTOTUNE=1 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 200 python3 tools/dgrad_sweep.py --only 0 1 2 --lean \
            2>&1 | grep -v Warning | tee "$OUT/dgrad-lean.log" ;;
    s62b)  # for session 62: the bf16 64 x 256 ws tile (the pick on ResNet-50's l4 3x3 layers and l4 1x1 expand) at
        # deeper rings, as TF32's gained 8-12% at 5 stages (s61t): direct at block_k 64 x 5 (200 KB; staged 5 does not
        # fit) and staged at block_k 32 x 8 (192 KB with the staging tile), against the 4-stage pick -> bf16-deep256.log
        t="implicit_gemm_ws:block_m=64,block_n=256,num_warps=4,persistent=1,parts=1,stack=0,split_k=1,stream_k=0"
        for spec in "64,512,7,7,512,3,3,1,1,1,1,nobias tile_n=64,tile_h=1,tile_w=1" \
                "64,512,14,14,512,3,3,2,1,1,1,nobias tile_n=64,tile_h=1,tile_w=1" \
                "64,512,7,7,2048,1,1,1,0,1,1,nobias tile_n=1,tile_h=1,tile_w=64"; do
            u="$t,${spec#* }"
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --shape "${spec%% *}" \
                --try "$u,block_k=64,num_stages=4,direct=0" --try "$u,block_k=64,num_stages=5,direct=1" \
                --try "$u,block_k=32,num_stages=8,direct=0" 2>&1 | grep -v Warning
        done | tee "$OUT/bf16-deep256.log" ;;
    s62l)  # for session 62: the ws tiles lose 0.3-2.4 us more than cuDNN to the bench's dirty L2 on every layer (s61f).
        # Does that cost follow the ring's depth (the producer's first burst of loads meeting the write-backs)? l4 3x3 @7
        # at 64 x 256 with 2 / 3 / 4 stages and 64 x 128 at 4 / 8, in the zero / read / none states -> flush-depth.log
        t="implicit_gemm_ws:block_k=64,block_m=64,num_warps=4,persistent=1,parts=1,stack=0,split_k=1,stream_k=0,direct=0"
        t="$t,tile_n=64,tile_h=1,tile_w=1"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 240 python3 tools/flush_probe.py --shape 64,512,7,7,512,3,3,1,1,1,1,nobias \
            --try "$t,block_n=256,num_stages=2" --try "$t,block_n=256,num_stages=3" --try "$t,block_n=256,num_stages=4" \
            --try "$t,block_n=128,num_stages=4" --try "$t,block_n=128,num_stages=8" 2>&1 | grep -v Warning \
            | tee "$OUT/flush-depth.log" ;;
    s62ab)  # for session 63: session 62's replay changes A/B on one machine, in alternating processes (heuristic
        # configs, so both trees run the same kernels). Before the call: `mkdir -p ab_old && git archive 6e704bb src |
        # tar -x -C ab_old` (the code before them; /ab_old/ is git-ignored) and pass carry ["ab_old"] -> train-ab.log
        if [ ! -d ab_old/src/convgemm ]; then
            echo "s62ab: ab_old/src/convgemm is missing; run: mkdir -p ab_old && git archive 6e704bb src | tar -x -C ab_old"
            echo "and pass carry [\"ab_old\"] to the device call"
        else
            for round in 1 2; do
                for tree in ab_old/src src; do
                    echo "## $tree, round $round"
                    CONVGEMM_AUTOTUNE=0 PYTHONPATH=$tree timeout 100 python3 tools/host_split.py --model resnet50 \
                        --train 2>&1 | grep -E "^==|Error"
                done
            done | tee "$OUT/train-ab.log"
        fi ;;
    s62t)  # for session 63: issue 6's eager training step after session 62's replay changes (under autocast the fp32
        # weight is cast inside the replay's Function: no ToCopyBackward node; Function.apply's C part; the cast and
        # the stride-1 dgrad's flipped copy in one kernel, CastFlip; CPU proxy tools/host_proxy.py: 25-35 us less host
        # work a layer). Prediction: host 21.4 ms a step (s60t, H100) falls by 0.7-1.8 ms, eager 0.91x -> 0.94-0.99x.
        # First the GPU replay and CastFlip tests (bf16 autocast bit for bit against the general path)
        # -> replay-tests.log, resnet-train-eager.{log,json}, train-host.log
        timeout 150 python3 -m pytest -q tests/test_nn.py -k "replay or train_key or cast_flip" -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/replay-tests.log"
        timeout "${TRAIN_TIMEOUT:-300}" python3 -m convgemm bench --model resnet50 --train --dtype bf16 \
            --modes "eager" --json "$OUT/resnet-train-eager.json" > "$OUT/resnet-train-eager.log" 2>&1
        echo "resnet50 train eager: rc=$?"; tail -3 "$OUT/resnet-train-eager.log"
        for v in "" --unpatched; do
            # shellcheck disable=SC2086  # $v is an option or nothing
            CONVGEMM_AUTOTUNE=0 timeout 90 python3 tools/host_split.py --model resnet50 --train $v 2>&1
        done > "$OUT/train-host.log"
        grep -E "^==|per call|host" "$OUT/train-host.log" | head -30 ;;
    s61h)  # session 61: where the eager ResNet-50 training step's host time goes now (s60t: host 21.4 ms a step against
        # cuDNN's 15.9; issue 6 asks 1.0x eager). Heuristic configs (CONVGEMM_AUTOTUNE=0: no tuning, the host path is
        # the same replay code): cProfile patched, then host_split patched and unpatched -> train-hprof.log, train-host.log
        CONVGEMM_AUTOTUNE=0 timeout 120 python3 tools/host_profile.py --model resnet50 --train 2>&1 | grep -v Warning \
            > "$OUT/train-hprof.log"
        for v in "" --unpatched; do
            # shellcheck disable=SC2086  # $v is an option or nothing
            CONVGEMM_AUTOTUNE=0 timeout 90 python3 tools/host_split.py --model resnet50 --train $v 2>&1
        done > "$OUT/train-host.log"
        grep -E "^==|per call|host" "$OUT/train-host.log" | head -30 ;;
    s61m)  # s61e's minimum (about 90 s): the TF32 ws candidates' GPU tests, then the tuner's TF32 picks on the three
        # layers s61t timed deeper (l4 3x3 (first), l4 3x3 @7, l2 3x3 (first)) from an empty cache -> ws-tf32.log, tf32-3.*
        timeout 70 python3 -m pytest -q -n 12 tests/test_conv3d.py -k "ws_tf32_every" -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/ws-tf32.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 60 python3 -m convgemm bench --dtype tf32 --check \
            --shape 64,512,14,14,512,3,3,2,1,1,1,nobias --shape 64,512,7,7,512,3,3,1,1,1,1,nobias \
            --shape 64,128,56,56,128,3,3,2,1,1,1,nobias --json "$OUT/tf32-3.json" > "$OUT/tf32-3.log" 2>&1
        echo "tf32 3 layers: rc=$?"; grep -E "implicit|geom|FAIL|Error" "$OUT/tf32-3.log" | tail -5 ;;
    s61e)  # s61d when little device time is left (about 3 minutes): the TF32 ws candidates' GPU tests, then TF32 on the
        # ResNet-50 suite only (the three layers s61t timed are in it) from empty caches -> ws-tf32.log, tf32-r50.*
        timeout 100 python3 -m pytest -q -n 12 tests/test_conv3d.py -k "ws_tf32_every" -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/ws-tf32.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tf32-r50-tune.jsonl timeout 200 python3 -m convgemm bench \
            --dtype tf32 --check --suite resnet50 --json "$OUT/tf32-r50.json" > "$OUT/tf32-r50.log" 2>&1
        echo "tf32 resnet50: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/tf32-r50.log" | tail -3 ;;
    s61d)  # session 61, after Ws3d.DIRECT_RING took TF32's direct 64 x 256 tile to 5 stages and 128 x 128 to 6 (s61t:
        # 65.1 -> 57.2, 56.4 -> 52.0, 81.2 -> 71.2 us forced): the ws candidates' GPU tests (TF32 every candidate among
        # them), then the TF32 all suite from empty caches (session 54: 1.28x) -> ws-cands.log, tf32-all.{log,json}
        bash "$0" ws_cands
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tf32-all-tune.jsonl timeout 420 python3 -m convgemm bench \
            --dtype tf32 --check --suite all --json "$OUT/tf32-all.json" > "$OUT/tf32-all.log" 2>&1
        echo "tf32 all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/tf32-all.log" | tail -3 ;;
    s61)  # session 61's first call (about 5 minutes): s60c (the 128 x 128 block_k-32 deep ring: GPU tests, tuner pick),
        # then s61f (the L2 state's cost on ResNet-50's ws layers)
        bash "$0" s60c
        bash "$0" s61f ;;
    s61t)  # session 61: do TF32 ws tiles gain from deeper rings now that the producer's per-step cost is gone (session
        # 58; the 16-bit 64 x 128 tile gained 1.06-1.37x at 8 stages, session 59)? The direct form caps TF32 rings at 4
        # (conv3d.Ws3d.direct_form); a TF32 stage at block_k 32 carries the bytes of a 16-bit one at 64 for half the
        # MMA work. 64 x 256 at 4 / 5 stages and 64 x 128 at 4 / 8 (l4 3x3 (first), TF32 0.72x in session 54; l4 3x3
        # @7 0.87x), 128 x 128 at 4 / 6 (l2 3x3 (first) 0.88x), tuned pick first (TF32, empty cache) -> tf32-deep.log
        t="implicit_gemm_ws:block_k=32,persistent=1,parts=1,stack=0,split_k=1,stream_k=0,direct=1"
        for spec in "64,512,14,14,512,3,3,2,1,1,1,nobias tile_n=64,tile_h=1,tile_w=1" \
                "64,512,7,7,512,3,3,1,1,1,1,nobias tile_n=64,tile_h=1,tile_w=1"; do
            u="$t,${spec#* },block_m=64,num_warps=4"
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --dtype tf32 --shape "${spec%% *}" \
                --try "$u,block_n=256,num_stages=4" --try "$u,block_n=256,num_stages=5" \
                --try "$u,block_n=128,num_stages=4" --try "$u,block_n=128,num_stages=8" 2>&1 | grep -v Warning
        done > "$OUT/tf32-deep.log"
        u="$t,tile_n=8,tile_h=4,tile_w=4,block_m=128,block_n=128,num_warps=8"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --dtype tf32 \
            --shape 64,128,56,56,128,3,3,2,1,1,1,nobias --try "$u,num_stages=4" --try "$u,num_stages=6" 2>&1 \
            | grep -v Warning >> "$OUT/tf32-deep.log"
        cat "$OUT/tf32-deep.log" ;;
    s61w)  # session 61: the ws wgrad's tiles on half-length pixel steps with twice the ring (ws_wgrad_probe.py --deep) on
        # ResNet-50's four wgrad layers under 0.9x (s59b: l4 3x3 @7 0.79x, 3x3 (first) 0.84x, 1x1 s2 2048 0.75x, 1x1
        # 2048->512 @7 0.86x): the wgrad candidates keep 3-4 stages of 48-64 KB; the forward's 64 x 128 tile gained
        # 1.06-1.37x from 8 stages (s59); 64-pixel steps also cover 7x7 outputs exactly -> wgrad-deep.log
        timeout 300 python3 tools/ws_wgrad_probe.py --deep \
            --layers r50-3x3-512@7,r50-3x3-512s2@14,r50-1x1-1024-2048s2@14,r50-1x1-2048-512@7 2>&1 | grep -v Warning \
            | tee "$OUT/wgrad-deep.log" ;;
    s61f)  # session 61: under Nsight Compute the 64 x 256 ws tile beat cuDNN's kernel on l4 3x3 @7 by 2.9 us (s59), in the
        # bench it loses about 3.6 us of that to the bench's dirty-L2 memset against cuDNN's 1-2 (s55's flush probe had
        # the same on ResNeXt). Is it every ws layer? The ResNet-50 layers under 0.95x and three 3x3 ws layers after a
        # zero (dirty L2), a read (clean) and no flush -> flush-r50.log
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout "${FLUSH_TIMEOUT:-240}" python3 tools/flush_probe.py \
            --shape 64,2048,7,7,512,1,1,1,0,1,1,nobias --shape 64,512,7,7,2048,1,1,1,0,1,1,nobias \
            --shape 64,1024,14,14,256,1,1,1,0,1,1,nobias --shape 64,1024,14,14,512,1,1,1,0,1,1,nobias \
            --shape 64,512,7,7,512,3,3,1,1,1,1,nobias --shape 64,512,14,14,512,3,3,2,1,1,1,nobias \
            --shape 64,128,28,28,128,3,3,1,1,1,1,nobias 2>&1 | grep -v Warning | tee "$OUT/flush-r50.log" ;;
    s60c)  # session 60, after Ws3d.deep_ring took the 128 x 128 tile at block_k 32 to 8 stages (s60a: 27.2 -> 23.2 us on
        # the seed's 96-channel 5x5 layer): the ws candidates' GPU tests (C = 32 cases offer that form), then the
        # tuner's pick on that layer from an empty cache -> ws-cands.log, deep128-tuned.log
        bash "$0" ws_cands
        t="implicit_gemm_ws:block_m=128,block_n=128,num_warps=8,persistent=1,parts=1,stack=0,split_k=1,stream_k=0,direct=0"
        t="$t,tile_n=8,tile_h=4,tile_w=4,block_k=32"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --shape 16,96,24,24,256,5,5,1,0,1,1,nobias \
            --try "$t,num_stages=4" --try "$t,num_stages=8" 2>&1 | grep -v Warning | tee "$OUT/deep128-tuned.log" ;;
    s60s)  # session 60: ResNet-50's strided 3x3 dgrads run DgradTma (s60: 0.79-0.81x, the only dgrad layers under 0.85x);
        # the per-phase forwards (tuned: the ws forward tiles, four launches) against it, untimed as a route since
        # session 6 -> dgrad-routes.log
        CONVGEMM_AUTOTUNE=1 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 200 python3 tools/dgrad_sweep.py --routes --only 0 1 2 \
            2>&1 | grep -v Warning | tee "$OUT/dgrad-routes.log" ;;
    s60t)  # for session 60: issue 6's ResNet-50 training step (batch 64, bf16), last timed in sessions 22 (eager
        # 0.84x, host-bound) and 25 (compile cudagraphs 1.01x) on the H200, before the ws forward tiles, the ws
        # wgrad and session 58's producer change -> resnet-train.json
        timeout "${TRAIN_TIMEOUT:-420}" python3 -m convgemm bench --model resnet50 --train --dtype bf16 \
            --modes "eager,compile cudagraphs" --json "$OUT/resnet-train.json" > "$OUT/resnet-train.log" 2>&1
        echo "resnet50 train: rc=$?"; tail -6 "$OUT/resnet-train.log" ;;
    s60)  # session 60's first call (about 7 minutes): s59e (s59d's deeper 192 x 128 rings, the grouped suite after
        # the 'grouped' prune) and s60a (deeper 128 x 128 rings); then s38c (the all suite: the deep 64 x 128 ring in
        # the tuner) and s60t (the training step) in calls of their own. First the GPU tests that run every ws
        # candidate (Ws3d.deep_ring's 8-stage 64 x 128 form among them) against float64 -> ws-cands.log
        bash "$0" ws_cands
        bash "$0" s59e
        bash "$0" s60a ;;
    ws_cands)  # the GPU tests that run every ws candidate against float64 -> ws-cands.log
        timeout 150 python3 -m pytest -q -n 12 tests/test_conv3d.py -k "ws_every_candidate or ws_tf32_every" \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 \
            | tee "$OUT/ws-cands.log" ;;
    s60b)  # when one call is all a session gets (about 8 minutes): the ws candidates' GPU tests, then s38c
        bash "$0" ws_cands
        bash "$0" s38c ;;
    s60a)  # for session 60: does the two-consumer 128 x 128 ws tile (the pick on l2 1x1 expand, CRAFT's up2 3x3, the
        # seed's 96x24x24 5x5) gain from a deeper ring too, as the 64 x 128 one did (s59: 1.06-1.37x at 8 stages
        # against 4)? 4 against 5 stages (32 KB a stage at block_k 64), 4 against 6 and 8 at block_k 32 -> deep128x2.log
        t="implicit_gemm_ws:block_m=128,block_n=128,num_warps=8,persistent=1,parts=1,stack=0,split_k=1,stream_k=0,direct=0"
        for spec in "64,128,28,28,512,1,1,1,0,1,1,nobias tile_n=1,tile_h=1,tile_w=128,block_k=64" \
                "1,256,96,96,128,3,3,1,1,1,1,nobias tile_n=1,tile_h=4,tile_w=32,block_k=64" \
                "16,96,24,24,256,5,5,1,0,1,1,nobias tile_n=8,tile_h=4,tile_w=4,block_k=32"; do
            u="$t,${spec#* }"
            case $spec in *block_k=32) deeper="--try $u,num_stages=6 --try $u,num_stages=8" ;;
                *) deeper="--try $u,num_stages=5" ;; esac
            # shellcheck disable=SC2086  # $deeper is a list of options
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --shape "${spec%% *}" \
                --try "$u,num_stages=4" $deeper 2>&1 | grep -v Warning
        done | tee "$OUT/deep128x2.log" ;;
    s58r)  # session 58: ResNet-50 channels_last from empty caches on whatever card is lent (the H200's last: session 38)
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench r50 "${R50_TIMEOUT:-200}" --suite resnet50 ;;
    s58d)  # session 58: is the 64 x 128 ws tile's slow K step (s57h: about 0.42 us a step against 0.56 for 64 x 256 of
        # twice the work, i.e. about 0.28 us fixed a step) the ring's latency? 64 x 128 at 4, 6 and 8 stages (24 KB a
        # stage), unsplit and as the hybrid (stream_k=2), against 64 x 256 at 4; prediction: if it is load latency, 8
        # stages take the 64 x 128 step toward 0.3 us (unsplit 60.8 -> about 45 us on l4 3x3 (first), the hybrid
        # 58.2 -> about 35) -> deep128.log
        t="implicit_gemm_ws:block_m=64,block_k=64,num_warps=4,tile_n=64,tile_h=1,tile_w=1,persistent=1,parts=1,stack=0"
        t="$t,split_k=1,direct=0"
        l4_probe deep128.log --try "$t,block_n=256,num_stages=4,stream_k=0" --try "$t,block_n=128,num_stages=4,stream_k=0" \
            --try "$t,block_n=128,num_stages=6,stream_k=0" --try "$t,block_n=128,num_stages=8,stream_k=0" \
            --try "$t,block_n=128,num_stages=8,stream_k=2" ;;
    s57)  # session 57's first call (about 6 minutes): the stream-K hybrid (s57h), gemm_1x1's 64 x 64 tiles (s56d),
        # the GPU tests of stream-K and gemm_1x1_nchw (s57t); s56s and s56a in a later call (s57h lost on the H100:
        # session 57's NOTES)
        bash "$0" s57h
        bash "$0" s56d
        bash "$0" s57t ;;
    s57s)  # the shortest form of s57 (about 4 minutes): the hybrid and gemm_1x1's 64 x 64 tiles, no tests
        bash "$0" s57h
        bash "$0" s56d ;;
    s57h)  # the data-parallel + stream-K hybrid (stream_k=2: the whole waves' tiles unsplit, the rest's K steps split
        # over all programs) on the three late ResNet-50 layers whose 64 x 256 tiles make 98 tiles on 132 SMs
        # (l4 3x3 (first) 0.81x, l4 3x3 @7 0.98x, l4 1x1 reduce @7 0.86x): 64 x 128 tiles make 196, one whole wave
        # and 64 split (at 4 and 6 stages: 164 KB); against 64 x 256 unsplit (the tuned pick), 64 x 128 unsplit, at two
        # programs an SM (3 stages: one wave of 264 slots), and stream-K over every tile -> hybrid.log
        t="implicit_gemm_ws:block_m=64,num_warps=4,tile_n=1,tile_h=1,tile_w=64,parts=1,stack=0,split_k=1,block_k=64,direct=0"
        for shape in 64,512,14,14,512,3,3,2,1,1,1,nobias 64,512,7,7,512,3,3,1,1,1,1,nobias \
                64,2048,7,7,512,1,1,1,0,1,1,nobias; do
            u=$t
            case $shape in *,3,3,*) u="${t/tile_n=1,tile_h=1,tile_w=64/tile_n=64,tile_h=1,tile_w=1}" ;; esac
            # (tuning off: the "tuned" line is the heuristic's pick, and the probe does not spend the call tuning;
            # the first form is session 55's tuned pick on the 3x3 layers)
            CONVGEMM_AUTOTUNE=0 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 100 python3 tools/config_probe.py --shape $shape \
                --try "$u,block_n=256,num_stages=4,persistent=1,stream_k=0" \
                --try "$u,block_n=128,num_stages=4,persistent=1,stream_k=0" \
                --try "$u,block_n=128,num_stages=3,persistent=2,stream_k=0" \
                --try "$u,block_n=128,num_stages=4,persistent=1,stream_k=2" \
                --try "$u,block_n=128,num_stages=6,persistent=1,stream_k=2" \
                --try "$u,block_n=128,num_stages=4,persistent=1,stream_k=1" 2>&1 | grep -v Warning
        done | tee "$OUT/hybrid.log" ;;
    s57t)  # the GPU tests of stream-K (hybrid included) and of gemm_1x1_nchw -> s57-tests.log
        timeout "${S57_TESTS_TIMEOUT:-120}" python3 -m pytest -q -n 12 tests/test_ws_consumers.py \
            tests/test_nchw.py -k "stream or gemm_1x1" -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/s57-tests.log" ;;
    s56)  # the next session's first call (about 9 minutes): s56b (gemm_1x1_nchw timed), s56t (its GPU tests), s56d
        # (gemm_1x1's 64 x 64 tiles on l4 1x1 reduce @7), s56a (deeper pipelines on l4 3x3 (first)); the most wanted first
        bash "$0" s56b
        bash "$0" s56t
        bash "$0" s56d
        bash "$0" s56a ;;
    s56c)  # session 56's second call, once Gemm1x1Nchw.CANDIDATES is on: ResNet-50 with NCHW input from empty caches
        # (auto keeps the 14x14 and 7x7 1x1 layers' NCHW input for gemm_1x1_nchw; the tuner weighs it against
        # implicit_gemm_tma_nchw on 28x28 and 56x56), then the NCHW GPU tests
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench r50-nchw "${NCHW_TIMEOUT:-150}" --suite resnet50 --layout nchw
        timeout 150 python3 -m pytest -q -n 12 tests/test_nchw.py tests/test_conv2d.py -k "nchw or NCHW" -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/nchw-tests.log" ;;
    s56d)  # l4 1x1 reduce 2048->512 @7 (0.86x: 19.1 us, cuDNN 16.4; gemm_1x1 64x128 = 8 x 25 = 200 tiles on 132 SMs,
        # 1.5 waves; 64x256: 104 tiles): 64 x 64 tiles give 8 x 49 = 392 tiles, 2.97 waves, without split-K's partials
        # (prediction: 15-17 us if the wave tail is the loss) -> g1-64.log
        g="gemm_1x1:block_m=64,block_k=64,num_warps=4"
        CONVGEMM_AUTOTUNE=0 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 100 python3 tools/config_probe.py --shape 64,2048,7,7,512,1,1,1,0,1,1,nobias \
            --try "$g,block_n=128,num_stages=4" --try "$g,block_n=64,num_stages=4" --try "$g,block_n=64,num_stages=6" \
            --try "$g,block_n=64,num_stages=8" 2>&1 | grep -v Warning | tee "$OUT/g1-64.log" ;;
    s56s)  # s56b cut to fit a short call: three layers (14x14, 7x7, 28x28), four configs each -> g1n-probe.log
        g="gemm_1x1_nchw:block_k=64"
        for shape in 64,1024,14,14,256,1,1,1,0,1,1,nobias 64,2048,7,7,512,1,1,1,0,1,1,nobias \
                64,512,28,28,256,1,1,1,0,1,1,nobias; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 60 python3 tools/config_probe.py --layout nchw --shape $shape \
                --try "$g,block_m=128,block_n=128,num_warps=8,num_stages=4" \
                --try "$g,block_m=128,block_n=64,num_warps=4,num_stages=4" \
                --try "$g,block_m=64,block_n=64,num_warps=4,num_stages=3" \
                --try "$g,block_m=128,block_n=64,num_warps=4,num_stages=4,persistent=2" 2>&1 | grep -v Warning
        done | tee "$OUT/g1n-probe.log" ;;
    s56t)  # gemm_1x1_nchw's GPU tests (every config on four layers, bf16 / fp16 / fp32, warm calls) -> g1n-tests.log
        timeout "${G1N_TESTS_TIMEOUT:-180}" python3 -m pytest -q -n 12 tests/test_nchw.py -k "gemm_1x1" -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/g1n-tests.log" ;;
    s56b)  # for session 56: gemm_1x1_nchw (session 55, interpreter and sm_90 compiles only: 1x1 GEMMs over NCHW planes
        # by pointers, for the 14x14 and 7x7 planes TMA cannot box): its configs forced on ResNet-50's 14x14 and 7x7 1x1
        # layers with NCHW input against cuDNN given NCHW and the tuned path (two transposes around an NHWC kernel); the
        # rel err column checks each against cuDNN (its GPU tests: s56t) -> g1n-probe.log
        g="gemm_1x1_nchw:block_k=64"
        # (then the 28x28 and 56x56 layers, which implicit_gemm_tma_nchw takes in per-image tiles, 77% full on
        # 28x28 planes: this kernel's pixel tiles run across images)
        for shape in 64,1024,14,14,256,1,1,1,0,1,1,nobias 64,256,14,14,1024,1,1,1,0,1,1,nobias \
                64,1024,14,14,512,1,1,1,0,1,1,nobias 64,2048,7,7,512,1,1,1,0,1,1,nobias 64,512,7,7,2048,1,1,1,0,1,1,nobias \
                64,512,28,28,256,1,1,1,0,1,1,nobias 64,128,28,28,512,1,1,1,0,1,1,nobias 64,256,56,56,128,1,1,1,0,1,1,nobias \
                64,256,56,56,64,1,1,1,0,1,1,nobias; do
            tries=()
            for t in "block_m=128,block_n=128,num_warps=8" "block_m=128,block_n=64,num_warps=4" \
                    "block_m=64,block_n=128,num_warps=4"; do
                for st in 3 4; do tries+=(--try "$g,$t,num_stages=$st"); done
            done
            tries+=(--try "$g,block_m=128,block_n=64,num_warps=4,num_stages=4,persistent=2")
            tries+=(--try "$g,block_m=128,block_n=128,num_warps=8,num_stages=4,persistent=1")
            # (the odd-plane configs, Gemm1x1Nchw.configs on 7 x 7)
            tries+=(--try "$g,block_m=64,block_n=64,num_warps=4,num_stages=3")
            tries+=(--try "gemm_1x1_nchw:block_m=128,block_n=64,block_k=32,num_warps=4,num_stages=3")
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 100 python3 tools/config_probe.py --layout nchw --shape $shape \
                "${tries[@]}" 2>&1 | grep -v Warning
        done | tee "$OUT/g1n-probe.log" ;;
    s56a)  # for session 56: deeper pipelines on ResNet-50's l4 3x3 (first) (0.81x; 39.7 us on the 64 x 256 tile at 4
        # stages against 31.3 for the stride-1 l4 3x3 of the same FLOPs and tiles: the strided layer reads 4x the input
        # bytes, from DRAM after the flush) -- 5 stages with the direct epilogue (205 KB of shared memory, no staging
        # tile), 8 stages of block_k 32 (164 KB) -- and the same on l4 3x3 @7 -> deep-stages.log
        t="implicit_gemm_ws:block_m=64,block_n=256,num_warps=4,tile_n=64,tile_h=1,tile_w=1,persistent=1,parts=1,stack=0,split_k=1,stream_k=0"
        l4_probe deep-stages.log --try "$t,block_k=64,num_stages=4,direct=0" --try "$t,block_k=64,num_stages=4,direct=1" \
            --try "$t,block_k=64,num_stages=5,direct=1" --try "$t,block_k=32,num_stages=8,direct=1" \
            --try "$t,block_k=32,num_stages=6,direct=0" ;;
    s55g)  # session 55: the fp16 all suite from empty caches (last run: H200, session 29) -> fp16-all.json, fp16-tune.jsonl
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/fp16-tune.jsonl timeout "${FP16_TIMEOUT:-330}" \
            python3 -m convgemm bench --dtype fp16 --check --suite all --json "$OUT/fp16-all.json" > "$OUT/fp16-all.log" 2>&1
        echo "fp16 all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/fp16-all.log" | tail -3 ;;
    s55f)  # session 55: where stream-K's extra SM cycles go (session 54: about 3x the cycles a K step of the unsplit
        # 64 x 256 tile on l4 3x3 @7): it (STREAM_TRY=1), the unsplit tile and split-K 2 under ncu with source counters,
        # the source page exported -> streamk-sass.csv
        # (one consumer, no stacking, the staged epilogue: what stream-K takes; the layer's default is three)
        t="implicit_gemm_ws:block_m=64,block_n=256,block_k=64,num_warps=4,num_stages=4,tile_n=64,tile_h=1,tile_w=1"
        t="$t,parts=1,stack=0,direct=0,split_k=1"
        ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 200 "$ncu_bin" --clock-control none --profile-from-start off \
            --section SpeedOfLight --section SourceCounters --section WarpStateStats -o "$OUT/streamk" \
            python3 tools/ncu_probe.py --shape 64,512,7,7,512,3,3,1,1,1,1,nobias --try "$t,persistent=1" \
            --try "$t,persistent=1,split_k=2" ${STREAM_TRY:+--try "$t,persistent=1,stream_k=1"} > "$OUT/ncu-streamk.log" 2>&1
        echo "ncu: rc=$?"; grep -E "^  [a-z_0-9]+.*\(|Duration" "$OUT/ncu-streamk.log" | head -12
        "$ncu_bin" --import "$OUT/streamk.ncu-rep" --page source --print-source sass --csv > "$OUT/streamk-sass.csv" 2>&1
        echo "source page: rc=$? $(wc -l < "$OUT/streamk-sass.csv") lines" ;;
    s55e)  # session 55's last call: the all suite from empty caches (grouped_mma's TMA form from 8 channels a group,
        # 3 and 4 stages), the filter transpose's new tile against the old (--weights), grouped_mma's GPU tests,
        # then ResNet-50 with NCHW input and weights (its 3x3 rows pack the weight every call)
        bash "$0" s38c
        timeout 90 python3 tools/transpose_probe.py --weights --tiles 64x64/4,256x16/4,128x16/4,512x16/8,128x32/4 \
            2>&1 | grep -v Warning | tee "$OUT/transpose-weights.log" | tail -4
        timeout "${GMMA_TESTS_TIMEOUT:-90}" python3 -m pytest -q -n 12 tests/test_grouped_mma.py tests/test_layout.py \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 \
            | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) bench r50-nchw "${NCHW_TIMEOUT:-150}" --suite resnet50 --layout nchw ;;
    s55d)  # session 55: deeper TMA pipelines for grouped_mma's TMA form (ncu, s55c: 64% of its stall samples wait on a
        # TMA barrier, DRAM at 61%; only 3 stages offered) on the strided and 16-channel layers -> gmma-stages.log
        g="grouped_mma:block_k=16,num_warps=4"
        for which in "64,512,28,28,512,3,3,2,1,1,32,nobias block_m=128,block_n=4,tile_n=32,tile_h=2,tile_w=2" \
                "64,256,56,56,256,3,3,2,1,1,32,nobias block_m=64,block_n=8,tile_n=4,tile_h=4,tile_w=4" \
                "64,512,14,14,512,3,3,1,1,1,32,nobias block_m=128,block_n=4,tile_n=32,tile_h=2,tile_w=2" \
                "64,256,28,28,256,3,3,1,1,1,32,nobias block_m=128,block_n=4,tile_n=8,tile_h=4,tile_w=4" \
                "64,1024,14,14,1024,3,3,2,1,1,32,nobias block_m=64,block_n=4,block_k=32,tile_n=64,tile_h=1,tile_w=1"; do
            set -- $which
            tries=()
            for st in 2 3 4 5 6; do tries+=(--try "$g,$2,num_stages=$st"); done
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 100 python3 tools/config_probe.py --shape "$1" "${tries[@]}" 2>&1 \
                | grep -v Warning
        done | tee "$OUT/gmma-stages.log" ;;
    s55c)  # session 55: the L2 state before a timed run (bench: dirty after its memset; ncu: clean) on ResNeXt's
        # layers and two dense ones, then the strided 16-channel TMA form's per-instruction stalls (a saved ncu
        # report's source page) -> flush.log, gmma-s2-sass.csv
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout "${FLUSH_TIMEOUT:-200}" python3 tools/flush_probe.py 2>&1 | grep -v Warning \
            | tee "$OUT/flush.log"
        ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        t="grouped_mma:block_m=128,block_n=4,block_k=16,num_warps=4,num_stages=3,tile_n=32,tile_h=2,tile_w=2"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 150 "$ncu_bin" --clock-control none --profile-from-start off \
            --section SourceCounters --section WarpStateStats -o "$OUT/gmma-s2" python3 tools/ncu_probe.py --shape 64,512,28,28,512,3,3,2,1,1,32,nobias --try "$t" \
            > "$OUT/ncu-src.log" 2>&1
        echo "ncu: rc=$?"; tail -3 "$OUT/ncu-src.log"
        "$ncu_bin" --import "$OUT/gmma-s2.ncu-rep" --page source --print-source sass --csv > "$OUT/gmma-s2-sass.csv" 2>&1
        echo "source page: rc=$? $(wc -l < "$OUT/gmma-s2-sass.csv") lines" ;;
    s55b)  # session 55: the grouped suite from empty caches with the TMA form offered from 8 channels a group
        # (MIN_TMA_CG 16 -> 8, after s55a's probe), then Nsight Compute (with source counters) on that form on
        # the 8-channel 256 @28 and the strided 16-channel 512 @28 s2 against cuDNN -> grouped.json,
        # ncu-gmma-8.log, ncu-gmma-s2.log
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) bench grouped "${GROUPED_TIMEOUT:-200}" --suite grouped
        t="grouped_mma:block_m=128,block_n=4,block_k=16,num_warps=4,num_stages=3"
        ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        for which in "8 64,256,28,28,256,3,3,1,1,1,32,nobias tile_n=8,tile_h=4,tile_w=4" \
                "s2 64,512,28,28,512,3,3,2,1,1,32,nobias tile_n=32,tile_h=2,tile_w=2"; do
            set -- $which
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout "${NCU_TIMEOUT:-150}" "$ncu_bin" --clock-control none \
                --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
                --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
                --section SourceCounters --section MemoryWorkloadAnalysis_Tables \
                python3 tools/ncu_probe.py --shape "$2" --try "$t,$3" > "$OUT/ncu-gmma-$1.log" 2>&1
            echo "ncu $1: rc=$?"; grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput" \
                "$OUT/ncu-gmma-$1.log" | head -24
        done ;;
    s55a)  # session 54's plan for one call: the all suite from empty caches (s38c: the TMA form through the
        # tuner on ResNeXt's 16-channel layers, first calls), then the TMA form's tap-minor joins probed on the
        # 8- and 4-channel layers (s54a) -> all.json, all.log, all-tune.jsonl, gmma-tma-probe.log, gmma-tma-tests.log
        bash "$0" s38c
        GMMA_SHAPES="${GMMA_SHAPES:-64,256,28,28,256,3,3,1,1,1,32,nobias 64,256,56,56,256,3,3,2,1,1,32,nobias \
            64,128,56,56,128,3,3,1,1,1,32,nobias}" GMMA_TESTS_TIMEOUT="${GMMA_TESTS_TIMEOUT:-90}" bash "$0" s54a ;;
    s54a)  # session 54: grouped_mma's TMA-box form (tile_* configs; interpreter and sm_90 compiles only): every
        # config, pointer and TMA forms, on the 16- and 8-channel-group ResNeXt layers against cuDNN and the
        # tuned pick (rel err against cuDNN's), then its GPU tests -> gmma-tma-*.log
        for shape in ${GMMA_SHAPES:-64,512,14,14,512,3,3,1,1,1,32,nobias 64,256,28,28,256,3,3,1,1,1,32,nobias \
                64,512,28,28,512,3,3,2,1,1,32,nobias 64,256,56,56,256,3,3,2,1,1,32,nobias}; do
            timeout 80 python3 tools/config_probe.py --shape $shape --configs grouped_mma 2>&1 | grep -v Warning
        done | tee "$OUT/gmma-tma-probe.log"
        timeout "${GMMA_TESTS_TIMEOUT:-120}" python3 -m pytest -q -n 12 tests/test_grouped_mma.py -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/gmma-tma-tests.log" ;;
    s53a)  # session 53: grouped_mma (batched per-group dot, compiled for sm_90 only): its GPU tests, then every
        # candidate on ResNeXt-50's seven 3x3 layers against cuDNN and the tuned choice -> gmma-*.log
        timeout "${GMMA_TESTS_TIMEOUT:-150}" python3 -m pytest -q -n 12 tests/test_grouped_mma.py -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -8 | tee "$OUT/gmma-tests.log"
        for shape in ${GMMA_SHAPES:-64,128,56,56,128,3,3,1,1,1,32,nobias 64,256,56,56,256,3,3,2,1,1,32,nobias \
                64,256,28,28,256,3,3,1,1,1,32,nobias 64,512,28,28,512,3,3,2,1,1,32,nobias 64,512,14,14,512,3,3,1,1,1,32,nobias \
                64,1024,14,14,1024,3,3,2,1,1,32,nobias 64,1024,7,7,1024,3,3,1,1,1,32,nobias}; do
            timeout 100 python3 tools/config_probe.py --shape $shape --configs grouped_mma 2>&1 | grep -v Warning
        done | tee "$OUT/gmma-probe.log" ;;
    s52a)  # session 52: the stacked tile on 28x28 outputs (Ws3d.STACKED_FILL, offered there now): forced on
        # ResNet-50's l2 3x3 layers against cuDNN and the tuned choice -> stack28.log
        t="implicit_gemm_ws:block_m=64,block_n=128,block_k=64,num_warps=4,num_stages=4,persistent=1,parts=3,stack=1,split_k=1,direct=0,stream_k=0"
        for shape in ${STACK_SHAPES:-64,128,56,56,128,3,3,2,1,1,1,nobias 64,128,28,28,128,3,3,1,1,1,1,nobias}; do
            timeout 100 python3 tools/config_probe.py --shape $shape --try "$t,tile_n=4,tile_h=4,tile_w=4" \
                --try "$t,tile_n=16,tile_h=2,tile_w=2" 2>&1 | grep -v Warning
        done | tee "$OUT/stack28.log" ;;
    s52b)  # session 52: ResNet-50's strided 3x3 dgrads (dgrad_tma, 0.79-0.84x cuDNN on the H100) against the
        # per-phase forward convolutions, both tuned, now that 14x14 and 28x28 forwards get the stacked tile
        # -> dgrad-routes.log
        CONVGEMM_AUTOTUNE=1 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout "${ROUTES_TIMEOUT:-200}" python3 tools/dgrad_sweep.py \
            --routes --only 0 1 2 2>&1 | grep -v Warning | tee "$OUT/dgrad-routes.log" ;;
    s51b)  # session 51: stacked consumer blocks (Config.stack; emulated on the CPU and compiled for sm_90 only):
        # their GPU tests, then the 192 x 128 stacked tile forced on the four all-suite layers that
        # Ws3d.STACKED_CANDIDATES would offer it to, against cuDNN and the tuned choice -> stack-*.log
        timeout "${STACK_TESTS_TIMEOUT:-150}" python3 -m pytest -q -n 12 tests/test_ws_consumers.py -k "stacked" -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -6 | tee "$OUT/stack-tests.log"
        t="implicit_gemm_ws:block_m=64,block_n=128,block_k=64,num_warps=4,num_stages=4,persistent=1,parts=3,stack=1,split_k=1,direct=0,stream_k=0"
        # (STACK_SHAPES: the first two alone for a short call)
        for shape in ${STACK_SHAPES:-64,256,14,14,256,3,3,1,1,1,1,nobias 64,256,28,28,256,3,3,2,1,1,1,nobias \
            64,512,28,28,1024,1,1,2,0,1,1,nobias 16,64,112,112,128,3,3,1,0,1,1}; do
            timeout 100 python3 tools/config_probe.py --shape $shape --try "$t,tile_n=16,tile_h=2,tile_w=2" \
                --try "$t,tile_n=64,tile_h=1,tile_w=1" 2>&1 | grep -v Warning
        done | tee "$OUT/stack-probe.log" ;;
    s51c)  # session 51: the NCHW rows under 1.0x split into the input's transpose, the NHWC call and the
        # result's transpose, each timed alone, beside the whole NCHW call and cuDNN's -> nchw-parts.log
        timeout "${NCHW_PARTS_TIMEOUT:-150}" python3 tools/transpose_probe.py --layers > "$OUT/nchw-parts.log" 2>&1
        echo "nchw parts: rc=$?"; cat "$OUT/nchw-parts.log" | tail -10 ;;
    s51a)  # session 51: the NCHW <-> channels_last transposes against a copy of the same bytes (the NCHW rows'
        # gap to their channels_last times, session 33), the library's tile and others -> transpose.log
        timeout "${TRANSPOSE_TIMEOUT:-240}" python3 tools/transpose_probe.py ${TRANSPOSE_ARGS:-} > "$OUT/transpose.log" 2>&1
        echo "transpose: rc=$?"; tail -4 "$OUT/transpose.log" ;;
    s38c)  # issue 4's first-call target on the whole all suite, from empty caches
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/all-tune.jsonl \
            timeout 330 python3 -m convgemm bench --dtype bf16 --check --suite all --json "$OUT/all.json" \
            > "$OUT/all.log" 2>&1
        echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3 ;;
    s38d)  # grouped_ws and wgrad_grouped_ws as tuner candidates (session 37, after their probes): the
        # refusal test fixed for the GPU, then the grouped suite forward and wgrad from empty caches
        timeout 120 python3 -m pytest -q -n 12 tests/test_grouped_ws.py -k "refusals" -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -5 | tee "$OUT/tests.log"
        for d in fwd wgrad; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-grouped-$d.jsonl \
                timeout 200 python3 -m convgemm bench --dtype bf16 --check --suite grouped --direction $d \
                --json "$OUT/grouped-$d.json" > "$OUT/grouped-$d.log" 2>&1
            echo "grouped $d: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/grouped-$d.log" | tail -3
        done ;;
    s37a)  # grouped_ws (session 36, written without a GPU): its GPU tests, then its candidates against
        # grouped_tma's on ResNeXt's 3x3 layers in TF32 (where grouped_tma multiplies 8-16x the useful products)
        timeout 200 python3 -m pytest -q -n 12 tests/test_grouped_ws.py tests/test_nonfinite.py -p no:cacheprovider \
            --tb=short -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/tests.log"
        DTYPE=tf32 bash "$0" grouped_probe ;;
    s37b)  # the same probe in bf16
        DTYPE=bf16 bash "$0" grouped_probe ;;
    grouped_probe)
        for shape in 64,128,56,56,128,3,3,1,1,1,32,nobias 64,256,56,56,256,3,3,2,1,1,32,nobias \
            64,256,28,28,256,3,3,1,1,1,32,nobias 64,512,28,28,512,3,3,2,1,1,32,nobias \
            64,512,14,14,512,3,3,1,1,1,32,nobias 64,1024,14,14,1024,3,3,2,1,1,32,nobias \
            64,1024,7,7,1024,3,3,1,1,1,32,nobias; do
            # (and the first candidate with a deeper ring: 4 stages of its small slots fill under half
            # the shared memory)
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 120 python3 tools/config_probe.py --shape $shape --grouped \
                --dtype "${DTYPE:-tf32}" --try grouped_ws:num_stages=6
        done 2>&1 | tee "$OUT/grouped-probe-${DTYPE:-tf32}.log" ;;
    s37d)  # wgrad_grouped_ws (session 36, written without a GPU, checked by emulation): its GPU tests, then
        # every candidate against cuDNN and the tuned choice on ResNeXt's grouped 3x3 wgrads (0.42-0.65x
        # with wgrad_grouped_tma in session 21)
        timeout 200 python3 -m pytest -q -n 12 tests/test_grouped_ws.py -k wgrad -p no:cacheprovider --tb=short \
            -W ignore 2>&1 | grep -E "^E  |FAILED|Error|passed|failed" | tail -10 | tee "$OUT/tests-wgrad.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 360 python3 tools/grouped_wgrad_probe.py 2>&1 \
            | tee "$OUT/grouped-wgrad-probe.log" ;;
    s37c)  # why a strided 3x3 runs 1.3-1.4x longer than an unstrided one of the same output and FLOPs
        # (session 35: 43.6 against 31.1 us, one tile): DRAM bytes, L2 hit rate and stalls of
        # ResNet-50's l2 3x3 (first, stride 2, 51 MB of input: more than L2) and the stride-1
        # layer with its output size, on the tuned tile of the first
        t="implicit_gemm_ws:block_m=128,block_n=128,block_k=64,num_warps=8,num_stages=4,tile_n=8,tile_h=4,tile_w=4"
        NCU_ARGS="--shape 64,128,56,56,128,3,3,2,1,1,1,nobias --shape 64,128,28,28,128,3,3,1,1,1,1,nobias \
            --try $t,persistent=1" bash "$0" ncu ;;
    s36b)  # where stream-K's 14-21 us go (session 35: every stream-K form lost): Nsight Compute on l4 3x3 @7,
        # its 64 x 256 tile unsplit and as stream-K (session 44's run on l4 3x3 (first) was refused: a strided
        # 2-D layer reads the phase-grid view, which stream-K does not take)
        t="implicit_gemm_ws:block_m=64,block_n=256,block_k=64,num_warps=4,num_stages=4,tile_n=64,tile_h=1,tile_w=1"
        NCU_ARGS="--shape 64,512,7,7,512,3,3,1,1,1,1,nobias --try $t,persistent=1 --try $t,persistent=1,stream_k=1" \
            bash "$0" ncu ;;
    s35e)  # issue 9's Inductor target against the Triton template alone (s35c's max-autotune run let
        # Inductor pick cuDNN, and fell back to eager from its 9th layer: dynamo's recompile limit)
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout "${INDUCTOR_TIMEOUT:-540}" python3 -m convgemm bench --dtype bf16 \
            --suite "${INDUCTOR_SUITE:-resnet50}" \
            --baseline cudnn,inductor-triton --json "$OUT/inductor-triton.json" > "$OUT/inductor-triton.log" 2>&1
        echo "rc=$?"; grep -E "geom|FAIL|Error|inductor failed" "$OUT/inductor-triton.log" | tail -6 ;;
    s34d)  # session 33's untested files, and the fp32 tests on the 3xTF32 default (100-110 s each)
        {
            for f in tests/test_backward.py tests/test_tune_cache.py "tests/test_models.py -k 768" tests/test_nn.py; do
                # shellcheck disable=SC2086  # $f may carry a -k filter
                timeout 100 python3 -m pytest -q -n 12 $f -p no:cacheprovider --tb=short -W ignore 2>&1 \
                    | grep -E "^E  |FAILED|Error|passed|failed" | tail -8
            done
            timeout 110 python3 -m pytest -q -n 12 tests/test_conv2d.py tests/test_matmul.py tests/test_nonfinite.py \
                tests/test_problem.py -k "fp32 or float32 or tf32" -p no:cacheprovider --tb=short -W ignore 2>&1 \
                | grep -E "^E  |FAILED|Error|passed|failed" | tail -8
        } | tee "$OUT/tests.log" ;;
    s34c)  # 3xTF32 with the nearest split and per-K-tile IEEE adds: accuracy against float64, then speed
        timeout 120 python3 -m pytest -q tests/test_matmul.py -k tf32 -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "^E  |FAILED|Error|passed|failed" | tail -6 | tee "$OUT/tests.log"
        CONVGEMM_FP32_PRECISION=tf32x3 CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 200 python3 tools/fp32_accuracy.py \
            > "$OUT/fp32-acc-tf32x3.log" 2>&1; tail -3 "$OUT/fp32-acc-tf32x3.log"
        CONVGEMM_FP32_PRECISION=tf32x3 timeout 100 python3 tools/craft_accuracy.py 2>&1 | tail -2 | tee "$OUT/craft-acc.log"
        CONVGEMM_AUTOTUNE=0 CONVGEMM_FP32_PRECISION=ieee timeout 120 python3 tools/fp32_accuracy.py \
            > "$OUT/fp32-acc-ieee.log" 2>&1; tail -2 "$OUT/fp32-acc-ieee.log" ;;
    s34b)  # strided 3x3 dgrad: the per-phase forwards (tuned, in place since session 33) against DgradTma
        CONVGEMM_AUTOTUNE=1 CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-s34b.jsonl \
            timeout 300 python3 tools/dgrad_sweep.py --routes --only 0 1 2 3 2>&1 | tee "$OUT/dgrad-routes.log" ;;
    s34a)  # session 33's untested GPU files after the strided-output change (NOTES "Session 33", Next 1)
        for f in tests/test_backward.py tests/test_tune_cache.py "tests/test_models.py -k 768" tests/test_nn.py; do
            # shellcheck disable=SC2086  # $f may carry a -k filter
            timeout 140 python3 -m pytest -q -n 12 $f -p no:cacheprovider --tb=short -W ignore 2>&1 \
                | grep -E "^E  |FAILED|Error|passed|failed" | tail -8
        done | tee "$OUT/tests.log" ;;
    s31a)
        bash "$0" parts
        for suite in small-channel grouped; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-s31a.jsonl \
                timeout 150 python3 -m convgemm bench --dtype bf16 --check --suite $suite --direction fwd \
                --json "$OUT/${suite%%-*}.json" > "$OUT/${suite%%-*}.log" 2>&1
            echo "$suite: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/${suite%%-*}.log" | tail -3
        done ;;
    parts)
        timeout 200 python3 -m pytest -q -n 14 tests/test_split_k.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -12 | tee "$OUT/tests.log"
        # (shape, pixel box of 64): 14x14 and 28x28 outputs take 16 images x 2 x 2
        for shape in 64,1024,14,14,256,1,1,1,0,1,1,nobias 64,256,14,14,256,3,3,1,1,1,1,nobias \
            64,256,28,28,256,3,3,2,1,1,1,nobias 64,1024,14,14,512,1,1,1,0,1,1,nobias \
            64,512,28,28,256,1,1,1,0,1,1,nobias 64,128,56,56,128,3,3,2,1,1,1,nobias; do
            t="block_m=128,block_n=64,block_k=64,num_warps=8,tile_n=16,tile_h=2,tile_w=2"
            CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 90 python3 tools/config_probe.py --shape $shape --parts \
                --try "implicit_gemm_tma:$t,num_stages=4,persistent=1,parts=3" \
                --try "implicit_gemm_tma:$t,num_stages=5,persistent=1,parts=3" \
                --try "implicit_gemm_tma:$t,num_stages=3,persistent=2,parts=3" \
                --try "implicit_gemm_tma:$t,num_stages=4,persistent=1,parts=2" 2>&1 | grep -v Warning
        done | tee "$OUT/parts-probe.log"
        # CRAFT's conv4_x (9216 pixels x 512 channels, batch 1): 384 tiles of 128 x 96 or 64 x 192, 2.9 waves
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 90 python3 tools/config_probe.py --shape 1,512,96,96,512,3,3,1,1 --parts \
            --try "implicit_gemm_tma:block_m=128,block_n=32,block_k=64,num_warps=8,num_stages=4,tile_n=1,tile_h=1,tile_w=32,persistent=1,parts=3" \
            --try "implicit_gemm_tma:block_m=64,block_n=64,block_k=64,num_warps=4,num_stages=4,tile_n=1,tile_h=2,tile_w=32,persistent=1,parts=3" \
            2>&1 | grep -v Warning | tee -a "$OUT/parts-probe.log" ;;
    ncu)
        ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout "${NCU_TIMEOUT:-200}" "$ncu_bin" --clock-control none \
            --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
            --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
            python3 tools/ncu_probe.py ${NCU_ARGS:-} > "$OUT/ncu.log" 2>&1
        echo "ncu: rc=$?"; grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|profiled|: " \
            "$OUT/ncu.log" | head -60 ;;
    s30b)
        timeout 150 python3 -m pytest -q -n 14 tests/test_flat_rows.py tests/test_conv2d.py -k "flat_rows or head" \
            -p no:cacheprovider --tb=short -W ignore 2>&1 | grep -E "FAILED|Error|passed|failed" | tail -12 \
            | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-all.jsonl \
            timeout 300 python3 -m convgemm bench --dtype bf16 --check --suite all --json "$OUT/all.json" \
            > "$OUT/all.log" 2>&1
        echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3 ;;
    s29next)
        timeout 150 python3 -m pytest -q -n 14 tests/test_flat_rows.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -12 | tee "$OUT/tests.log"
        for shape in 32,8,128,128,8,3,3,1,1,1,1 16,16,512,512,16,3,3,1,0,1,1 1,16,384,384,16,1,1,1,0,1,1; do
            timeout 90 python3 tools/config_probe.py --shape $shape \
                --try "flat_rows:persistent=2,num_stages=3" --try "flat_rows:persistent=2,num_stages=4" \
                --try "flat_rows:persistent=4,num_stages=3" \
                --try "flat_rows:block_m=256,num_warps=8,persistent=1,num_stages=3" 2>&1 | grep -v Warning
        done | tee "$OUT/probe.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-all.jsonl \
            timeout 260 python3 -m convgemm bench --dtype bf16 --check --suite all --json "$OUT/all.json" \
            > "$OUT/all.log" 2>&1
        echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3 ;;
    s29b)
        # session 29: flat_rows' GPU tests (the fp32 rows as one chunk), then the all suite in bf16
        # (first calls from empty caches) and fp16
        timeout 120 python3 -m pytest -q -n 14 tests/test_flat_rows.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -12 | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-all.jsonl \
            timeout 260 python3 -m convgemm bench --dtype bf16 --check --suite all --json "$OUT/all.json" \
            > "$OUT/all.log" 2>&1
        echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 240 python3 -m convgemm bench --dtype fp16 --check --suite all \
            --json "$OUT/fp16-all.json" > "$OUT/fp16-all.log" 2>&1
        echo "fp16 all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/fp16-all.log" | tail -3 ;;
    s28a)
        # session 28: the fp32 tiles (tests/test_fp32_tiles.py: every candidate config, strict and
        # TF32), then tf32 and strict fp32 over resnet50 + craft from empty caches; strict fp32 on
        # resnet50 once more with the tree before the change when $OLD_SRC names one
        timeout 200 python3 -m pytest -q -n 14 tests/test_fp32_tiles.py tests/test_conv2d.py \
            -k "fp32_every_config or (every_algorithm and fp32)" -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -12 | tee "$OUT/tests.log"
        for m in tf32 fp32; do
            CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-$m.jsonl timeout 200 python3 -m convgemm bench \
                --dtype $m --check --suite resnet50,craft --json "$OUT/$m.json" > "$OUT/$m.log" 2>&1
            echo "$m: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/$m.log" | tail -3
        done
        if [ -n "${OLD_SRC:-}" ]; then
            PYTHONPATH=$OLD_SRC CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 150 python3 -m convgemm bench --dtype fp32 \
                --check --suite resnet50 --json "$OUT/fp32-old.json" > "$OUT/fp32-old.log" 2>&1
            echo "fp32 old: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/fp32-old.log" | tail -3
        fi ;;
    s28b)
        # session 28: every strict fp32 / TF32 candidate config (the reverted FMA tiles' test, on
        # the tuner's own lists), the grouped suite from empty caches (the first shape with
        # triton_key hashed during setup), then fp16 over the all suite (issue 9: "fp16 as bf16")
        timeout 150 python3 -m pytest -q -n 14 tests/test_fp32_tiles.py -p no:cacheprovider --tb=short -W ignore 2>&1 \
            | grep -E "FAILED|Error|passed|failed" | tail -12 | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-grouped.jsonl \
            timeout 150 python3 -m convgemm bench --dtype bf16 --check --suite grouped --json "$OUT/grouped.json" \
            > "$OUT/grouped.log" 2>&1
        echo "grouped: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/grouped.log" | tail -3
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 300 python3 -m convgemm bench --dtype fp16 --check --suite all \
            --json "$OUT/fp16-all.json" > "$OUT/fp16-all.log" 2>&1
        echo "fp16 all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/fp16-all.log" | tail -3 ;;
    s28c)
        # tf32 over the all suite after session 28's fp32 stems and tiles (session 27: 1.13x)
        CONVGEMM_CACHE_DIR=$(mktemp -d) timeout 300 python3 -m convgemm bench --dtype tf32 --check --suite all \
            --json "$OUT/tf32-all.json" > "$OUT/tf32-all.log" 2>&1
        echo "tf32 all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/tf32-all.log" | tail -3 ;;
    s27next)
        # after session 27: width_unfold in fp32 (GPU tests, then the tf32 small-channel, seed and
        # ResNet-50 suites: RGB stems, against session 27's tf32 run where small_k took the ResNet
        # stem at 0.65x; the dense layers' new 128x128 fp32 tile, ResNet-50 0.85x there), then the
        # grouped suite from empty caches (first calls of the 7x7 layers)
        timeout 200 python3 -m pytest -q -n 14 tests/test_conv2d.py -k "width_unfold or every_algorithm" \
            -p no:cacheprovider --tb=line -W ignore 2>&1 | grep -E "FAILED|ERROR|passed|failed" | tail -12 \
            | tee "$OUT/tests.log"
        CONVGEMM_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-tf32.jsonl timeout 300 python3 -m convgemm bench \
            --dtype tf32 --check --suite small-channel,seed,resnet50 --json "$OUT/tf32-sc-seed.json" \
            > "$OUT/tf32-sc-seed.log" 2>&1
        echo "tf32 sc-seed-resnet50: rc=$?"; grep -E "geom|FAIL|Error|stem" "$OUT/tf32-sc-seed.log" | tail -6
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/tune-grouped.jsonl \
            timeout 200 python3 -m convgemm bench --dtype bf16 --check --suite grouped --json "$OUT/grouped.json" \
            > "$OUT/grouped.log" 2>&1
        echo "grouped: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/grouped.log" | tail -3 ;;
    tf32)
        # the tf32 forward over the all suite (issue 9: tf32 geomean >= 1.5x; last timed on the
        # seed suite in session 5)
        CONVGEMM_TUNE_LOG=$OUT/tune-tf32.jsonl timeout 500 python3 -m convgemm bench --dtype tf32 --check \
            --suite all --json "$OUT/tf32-all.json" > "$OUT/tf32-all.log" 2>&1
        echo "tf32 all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/tf32-all.log" | tail -3 ;;
    s26next)
        # after session 26: the whole all suite from empty caches with the launcher prebuild and
        # the one-channel unfold prune (first-call tuning over 87 shapes), then where the strided
        # 3-D dgrad's host time goes
        CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) CONVGEMM_TUNE_LOG=$OUT/all-tune.jsonl \
            timeout 420 python3 -m convgemm bench --dtype bf16 --check --suite all --json "$OUT/all.json" \
            > "$OUT/all.log" 2>&1
        echo "all: rc=$?"; grep -E "geom|FAIL|Error" "$OUT/all.log" | tail -3
        timeout 150 python3 tools/dgrad3d_host.py --profile 200 2>&1 | grep -v Warning > "$OUT/dgrad3d-profile.log"
        echo "dgrad3d profile: rc=$?"; head -8 "$OUT/dgrad3d-profile.log"
        # a 256-channel M tile for ResNet-50's l3 1x1 reduce (the 128-row tiles read x twice)
        timeout 120 python3 tools/config_probe.py --shape 64,1024,14,14,256,1,1,1,0,1,1,nobias \
            --try "gemm_1x1:block_m=256,block_n=128,block_k=64,num_warps=8,num_stages=3" \
            --try "gemm_1x1:block_m=256,block_n=128,block_k=64,num_warps=8,num_stages=4" \
            --try "gemm_1x1:block_m=128,block_n=128,block_k=64,num_warps=8,num_stages=4" 2>&1 | grep -v Warning \
            | tee "$OUT/l3-reduce-probe.log" ;;
    *) echo "gpu_session.sh: unknown step $step" ;;
    esac
done
