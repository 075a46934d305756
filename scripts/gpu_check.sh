#!/usr/bin/env bash
# One device call: GPU test suite (in parallel shards) and/or the benchmark, logs under $OUT.
#   scripts/gpu_check.sh tests              # shards of tests/ on the GPU
#   TEST_FILES="tests/kernels/test_a.py ..." TEST_SHARDS=4 scripts/gpu_check.sh tests  # just these
#   CASES=gelu_chain,softmax scripts/gpu_check.sh bench
#   scripts/gpu_check.sh tests bench
#   PROFILE_CASES=resnet50 scripts/gpu_check.sh profile
#   SWEEP_CASES=layernorm scripts/gpu_check.sh sweep   # launch configs against inductor
#   AOT_MODELS=gpt2 scripts/gpu_check.sh aot            # AOT packages against inductor's
#   COMPILE_TIME_CASES=resnet50 scripts/gpu_check.sh compile   # cold compiles, fresh processes
#   scripts/gpu_check.sh conformance        # OpInfo suite on the GPU (CONF_ARGS, CONF_JOBS)
#   MEMORY_CASES=vit_train scripts/gpu_check.sh memory   # peak memory, by allocating line
#   DASH_PART=1/6 scripts/gpu_check.sh dashboard        # one part of the model dashboard
#   REPROS=.repros FUZZ_BUDGET=300 scripts/gpu_check.sh correctness   # repros + differential fuzzing
set -u
OUT=${OUT:-/tmp/solder-gpu}; mkdir -p "$OUT"
export PYTHONPATH=. PYTHONDONTWRITEBYTECODE=1
PY=${PY:-python3}
{ nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"
for part in "$@"; do
  case $part in
  tests)
    # tests/kernels in shards, each in its own pytest process at once (the GPU is shared):
    # as one they needed more than 270 s on the H200 (2026-12-04); on an H100 three shards of
    # the six then in use ran past 290 s (2026-12-06), so the heavy files go alone
    k=tests/kernels
    named=("test_pointwise.py test_reductions.py test_views.py" "test_scatter.py"
           "test_sorting.py test_special_functions.py" "test_eager_arithmetic.py test_conformance_fixes.py"
           "test_user_kernels_matrix.py test_user_kernels_gpu.py" "test_scatter_props.py")
    shards=(); ignores=""
    for group in "${named[@]}"; do
      files=""; for f in $group; do files="$files $k/$f"; ignores="$ignores --ignore=$k/$f"; done
      shards+=("$files")
    done
    shards[5]="${shards[5]} tests/unit $(ls -d tests/aot 2>/dev/null)"
    shards+=("$k $ignores" "tests/models")
    if [ -n "${TEST_FILES:-}" ]; then   # TEST_FILES="a.py b.py" [TEST_SHARDS=4]: just these, dealt out
      shards=(); i=0
      for f in $TEST_FILES; do
        j=$((i % ${TEST_SHARDS:-4})); shards[$j]="${shards[$j]:-} $f"; i=$((i+1))
      done
    fi
    # a test that hangs fails with its stack (pytest-timeout, where installed) instead of
    # taking its shard down with it
    per_test=""; $PY -c "import pytest_timeout" 2>/dev/null && per_test="--timeout=${TEST_TIMEOUT:-150}"
    i=0
    for s in "${shards[@]}"; do
      timeout "${TEST_S:-300}" $PY -m pytest -v -p no:cacheprovider -rfE $per_test $s > "$OUT/tests$i.log" 2>&1 &
      i=$((i+1))
    done
    wait
    for f in "$OUT"/tests?.log; do
      echo "== $f"; grep -E "^(FAILED|ERROR)| FAILED| ERROR|passed|failed" "$f" | tail -25
      grep -qE "[0-9]+ (passed|failed)" "$f" || echo "   shard cut off by TEST_S; running then: $(grep '::' "$f" | tail -1 | cut -c1-160)"
    done
    cat "$OUT"/tests?.log > "$OUT/tests.log"; rm -f "$OUT"/tests?.log
    ;;
  profile)   # PROFILE_CASES=a,b [PROFILE_BACKENDS="solder"] [COMPILE_CASES=c] [WARM_CASES=c]: where the time
             # goes (per call, and a cold compile's stages); Solder's kernels in debug.tgz
    for c in ${PROFILE_CASES:+${PROFILE_CASES//,/ }}; do
      for b in ${PROFILE_BACKENDS:-inductor solder}; do
        SOLDER_DEBUG_DIR="$OUT/debug/$c" timeout 200 $PY -m solder.bench.profile "$c" --backend $b --top 25 ${PROFILE_FLAGS:-} \
          >> "$OUT/profile.txt" 2>> "$OUT/profile.err"
      done
    done
    # [COMPILE_BACKENDS="solder inductor"] [COMPILE_PROF=1: also a cProfiled compile per case
    # of Solder's, its stats in $OUT/<case>-solder.prof]
    for c in ${COMPILE_CASES:+${COMPILE_CASES//,/ }}; do
      for b in ${COMPILE_BACKENDS:-solder}; do
        profs=(""); [ -n "${COMPILE_PROF:-}" ] && [ $b = solder ] && profs+=("--compile-profile $OUT/$c-$b.prof")
        for prof in "${profs[@]}"; do
          SOLDER_CACHE=0 TRITON_CACHE_DIR=$(mktemp -d) TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) \
            TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 timeout 200 \
            $PY -m solder.bench.profile "$c" --backend $b --compile $prof \
            >> "$OUT/profile.txt" 2>> "$OUT/profile.err"
        done
      done
    done
    for c in ${WARM_CASES:+${WARM_CASES//,/ }}; do   # a cold compile, then a new process on its caches
      sc=$(mktemp -d); tc=$(mktemp -d)
      for run in cold warm; do
        echo "== $c $run start" >> "$OUT/profile.txt"
        SOLDER_CACHE_DIR=$sc TRITON_CACHE_DIR=$tc timeout 200 $PY -m solder.bench.profile "$c" --compile \
          >> "$OUT/profile.txt" 2>> "$OUT/profile.err"
      done
    done
    cat "$OUT/profile.txt"; tail -3 "$OUT/profile.err"
    (cd "$OUT" && tar czf debug.tgz debug && rm -rf debug)
    ;;
  compile)   # COMPILE_TIME_CASES=resnet50,llama_train [COMPILE_REPS=2]: cold compiles, each in a
             # fresh process, backends alternating first (solder/bench/compile_time.py);
             # [COMPILE_VARIANTS="early=compile_backward_early=1 ..."]: Solder with settings changed
             # [COMPILE_VARIANT_CASES=llama_train]: the variants for these cases only
    variants=(); for v in ${COMPILE_VARIANTS:-}; do variants+=(--variant "$v"); done
    [ -n "${COMPILE_VARIANT_CASES:-}" ] && variants+=(--variant-cases "$COMPILE_VARIANT_CASES")
    timeout "${COMPILE_TIME_S:-500}" $PY -m solder.bench.compile_time ${variants[@]+"${variants[@]}"} \
      --cases "${COMPILE_TIME_CASES:-gpt2,llama_train,resnet50}" --reps "${COMPILE_REPS:-2}" \
      --budget $(( ${COMPILE_TIME_S:-500} - 15 )) \
      --json "$OUT/compile_time.json" --log "$OUT/compile_time_runs.txt" \
      > "$OUT/compile_time.txt" 2> "$OUT/compile_time.err"
    echo "compile rc=$?"; cat "$OUT/compile_time.txt"; grep -v "^ " "$OUT/compile_time.err" | tail -20
    ;;
  bench)
    timeout "${BENCH_S:-300}" $PY -m solder bench ${CASES:+--cases "$CASES"} \
      ${BENCH_BACKENDS:+--backends "$BENCH_BACKENDS"} --json "$OUT/bench.json" \
      > "$OUT/bench.txt" 2> "$OUT/bench.err"
    echo "bench rc=$?"; cat "$OUT/bench.txt"; tail -5 "$OUT/bench.err"
    ;;
  conformance)   # CONF_ARGS="--dtypes float32 --samples 2" (default): the OpInfo suite on the GPU;
                 # ops still running CONF_DEADLINE s in are dropped and named, the rest reported
    timeout "${CONF_S:-500}" $PY -m solder conformance --device cuda --jobs "${CONF_JOBS:-8}" \
      --deadline "${CONF_DEADLINE:-$(( ${CONF_S:-500} - 45 ))}" \
      ${CONF_ARGS:---dtypes float32 --samples 2} --json "$OUT/conformance.json" \
      > "$OUT/conformance.txt" 2>&1
    echo "conformance rc=$?"; tail -8 "$OUT/conformance.txt"
    # with --write-expected-failures the list is rewritten in this copy of the repo: bring it back
    cp solder/conformance/expected_failures/*-cuda.txt "$OUT/" 2>/dev/null
    ;;
  sweep)   # SWEEP_CASES=layernorm,gelu_chain: every launch config of a list against inductor
    timeout "${SWEEP_S:-300}" $PY scripts/config_sweep.py ${SWEEP_CASES//,/ } --out "$OUT" \
      > "$OUT/sweep.txt" 2> "$OUT/sweep.err"
    echo "sweep rc=$?"; sed -n '/^case /,$p' "$OUT/sweep.txt"; tail -3 "$OUT/sweep.err"
    ;;
  variants)   # hand-written kernel variants of two micro cases (scripts/kernel_variants.py)
    timeout "${VARIANTS_S:-200}" $PY scripts/kernel_variants.py > "$OUT/variants.txt" 2> "$OUT/variants.err"
    echo "variants rc=$?"; sed -n '/^variant /,$p' "$OUT/variants.txt"; tail -3 "$OUT/variants.err"
    ;;
  aot)   # AOT_MODELS=gpt2,resnet50 [AOT_FLAGS="--quick --sides solder"]: packages against inductor's
    for m in ${AOT_MODELS//,/ }; do
      timeout "${AOT_S:-300}" $PY -m solder.bench.aot --model $m --out "$OUT/aot" ${AOT_FLAGS:-} \
        > "$OUT/aot_$m.txt" 2>&1
      echo "aot $m rc=$?"; tail -14 "$OUT/aot_$m.txt"
    done
    ;;
  dashboard)   # [DASH_PART=1/6] [DASH_FAMILY=timm] [DASH_MODE=training] [DASH_S=540]: one part of
               # the model dashboard's suite, its JSON in $OUT (merge the parts with
               # python -m solder.bench.dashboard $OUT/dashboard-*.json -o docs/dashboard.md)
    tag=${DASH_PART:-all}; tag=${tag//\//-of-}
    timeout "${DASH_S:-540}" $PY -m solder bench --suite dashboard ${DASH_PART:+--part "$DASH_PART"} \
      ${DASH_FAMILY:+--family "$DASH_FAMILY"} ${DASH_MODE:+--mode "$DASH_MODE"} --rounds 3 \
      --backends "${DASH_BACKENDS:-eager,inductor,solder}" --json "$OUT/dashboard-$tag.json" \
      > "$OUT/dashboard-$tag.txt" 2> "$OUT/dashboard-$tag.err"
    echo "dashboard rc=$?"; head -60 "$OUT/dashboard-$tag.txt"; tail -5 "$OUT/dashboard-$tag.err"
    ;;
  memory)   # MEMORY_CASES=resnet50_train,vit_train [MEMORY_BACKENDS=inductor,solder]: peak
            # memory of one call and what is alive at it, by the line that allocated it
    for c in ${MEMORY_CASES:+${MEMORY_CASES//,/ }}; do
      timeout 240 $PY -m solder.bench.memory "$c" --backends "${MEMORY_BACKENDS:-inductor,solder}" \
        >> "$OUT/memory.txt" 2>> "$OUT/memory.err"
    done
    cat "$OUT/memory.txt"; tail -3 "$OUT/memory.err"
    ;;
  correctness)   # [REPROS=dir of repro scripts (DEV = 'cuda')] [FUZZ_SEEDS=1,5:9 or FUZZ_SEED=100000 FUZZ_COUNT=20000
                 # FUZZ_BUDGET=300 FUZZ_JOBS=12 FUZZ_FLAGS=--grad]: each repro's last line, then
                 # random programs against eager until the budget is spent (fuzz.json, findings/)
    for f in ${REPROS:+$REPROS/*.py}; do
      printf '%s: ' "$f"; timeout 120 $PY "$f" 2>&1 | tail -1
    done | tee "$OUT/repros.txt"
    seeds=(--seed "${FUZZ_SEED:-100000}" --count "${FUZZ_COUNT:-20000}")
    [ -n "${FUZZ_SEEDS:-}" ] && seeds=(--seeds "$FUZZ_SEEDS")
    # (the budget also ends minimizing; the programs still running get their own timeout)
    timeout $(( ${FUZZ_BUDGET:-300} + 75 )) $PY -m solder fuzz "${seeds[@]}" \
      --budget "${FUZZ_BUDGET:-300}" --jobs "${FUZZ_JOBS:-12}" --device cuda ${FUZZ_FLAGS:-} \
      --out "$OUT/findings" --json "$OUT/fuzz.json" -q > "$OUT/fuzz.txt" 2>&1
    echo "fuzz rc=$?"; head -40 "$OUT/fuzz.txt"
    [ -d "$OUT/findings" ] && (cd "$OUT" && tar czf findings.tgz findings && rm -rf findings)
    ;;
  diag)   # DIAG="pytest args": one test with every stage dumped (in debug_diag.tgz)
    SOLDER_DEBUG_DIR="$OUT/debug/diag" timeout 120 $PY -m pytest -q -p no:cacheprovider -x $DIAG \
      > "$OUT/diag.txt" 2>&1; tail -5 "$OUT/diag.txt"
    for w in $(find "$OUT/debug/diag" -name wrapper.py 2>/dev/null | head -3); do echo "== $w"; cat "$w"; done
    (cd "$OUT" && tar czf debug_diag.tgz debug && rm -rf debug)
    ;;
  esac
done
