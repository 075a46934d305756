#!/usr/bin/env bash
# The kernel tests (tests/kernels, less the user-kernel matrix and scatter properties, which
# gpu_check.sh's other shards run) in four parallel groups on a GPU; logs under $OUT.
OUT=${OUT:-/tmp/solder-gpu}; mkdir -p "$OUT"
export PYTHONPATH=. PYTHONDONTWRITEBYTECODE=1
k=tests/kernels
groups=("$k/test_reductions.py $k/test_conformance_fixes.py $k/test_exact_cover.py"
        "$k/test_pointwise.py $k/test_pooling.py $k/test_sorting.py $k/test_memory_plan.py"
        "$k/test_scatter.py $k/test_views.py $k/test_index_checks.py $k/test_explain_and_errors.py"
        "$k/test_training.py $k/test_user_kernels.py $k/test_dynamic_random_extern.py $k/test_launch_gpu.py")
# a test file no group names runs in the first group: a new file is never left out
for f in $k/test_*.py; do
  case " ${groups[*]} " in *" $f "*) ;; *)
    case $f in */test_user_kernels_matrix.py|*/test_user_kernels_gpu.py|*/test_scatter_props.py) ;;
    *) groups[0]="${groups[0]} $f" ;; esac ;;
  esac
done
i=0
for g in "${groups[@]}"; do
  timeout -s INT "${TEST_S:-240}" python3 -m pytest -q -p no:cacheprovider -rfE $g > "$OUT/kt$i.log" 2>&1 &
  i=$((i+1))
done
wait
for f in "$OUT"/kt?.log; do echo "== $f"; grep -E "^(FAILED|ERROR)|passed|failed|Interrupt" "$f" | tail -12; done
