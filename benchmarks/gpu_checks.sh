#!/bin/bash
# Every check that needs an NVIDIA GPU, in one command: the GPU-marked tests, the op table on GPU arrays,
# the FlashAttention grid, MNIST on the GPU, the bfloat16 probe (CuPy's bf16 support, bf16 matmul accuracy and
# speed, the op table on bf16 GPU arrays), then the GPU benchmarks (one at a time, nothing else running).
#
#   bash benchmarks/gpu_checks.sh [OUT]     # logs and JSON into OUT (default gpu-checks/), a summary last
#
# Needs CuPy, Triton, and for the benchmarks' peers PyTorch and JAX with CUDA (FUNCGRAD_BENCH_PYTHON_<PEER>
# names another interpreter). MNIST must be in its cache (python -m funcgrad.datasets mnist). Each step has a
# time limit (GPU_CHECK_SCALE=2 doubles them); a step that runs out is killed with everything it started.
set -u
cd "$(dirname "$0")/.."
OUT=${1:-gpu-checks}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # Open MPI's mpiexec, where it is the one found
unset TRITON_INTERPRET
PY=${PYTHON:-python3}
SCALE=${GPU_CHECK_SCALE:-1}
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/stamps.txt"; }
# run LIMIT_S LOG COMMAND...: in a process group of its own, killed whole (children too) at the limit
run() {
  local limit=$(( $1 * SCALE )) log=$2; shift 2
  setsid "$@" > "$log" 2>&1 &
  local pid=$!
  ( sleep "$limit"; kill -TERM -- -"$pid" 2>/dev/null; sleep 5; kill -KILL -- -"$pid" 2>/dev/null ) &
  local watchdog=$!
  wait "$pid"; local rc=$?
  kill "$watchdog" 2>/dev/null
  return $rc
}
PT="$PY -m pytest -p no:cacheprovider -o addopts= -rA"
GPU_TESTS=$(ls tests/test_gpu_*.py tests/test_devices.py tests/test_distributed_gpu.py tests/test_distributed_training.py \
  tests/test_mixed_precision.py | grep -v test_gpu_ops.py)

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
run 300 "$OUT/pytest_gpu.txt" $PT -m gpu -n 8 $GPU_TESTS & P1=$!
run 300 "$OUT/pytest_ops.txt" $PT -m gpu -n 6 --dist load tests/test_gpu_ops.py & P2=$!
run 600 "$OUT/pytest_flash.txt" $PT -m gpu -n 12 tests/test_triton_flash.py & P3=$!
run 180 "$OUT/mnist_mlp.txt" $PY examples/mnist.py --device gpu --no-progress --out "$OUT/mnist_mlp"; stamp "mnist mlp rc=$?"
run 300 "$OUT/mnist_cnn.txt" $PY examples/mnist.py --device gpu --model cnn --no-progress --out "$OUT/mnist_cnn"; stamp "mnist cnn rc=$?"
run 120 "$OUT/mnist_bf16.txt" $PY examples/mnist.py --device gpu --precision bf16 --no-progress --out "$OUT/mnist_bf16"
stamp "mnist bf16 rc=$?"
wait $P1; stamp "pytest gpu rc=$?"
wait $P2; stamp "pytest ops rc=$?"
wait $P3; stamp "pytest flash rc=$?"
# nothing else runs now: the bfloat16 probe (its matmul timings), then the benchmarks
run 300 "$OUT/bf16_probe.txt" $PY benchmarks/gpu_bf16_probe.py --out "$OUT"; stamp "bf16 probe rc=$?"
run 900 "$OUT/bench.txt" $PY benchmarks/run_all.py --gpu --out "$OUT"; stamp "benchmarks rc=$?"

echo "=== GPU-marked tests"; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)" "$OUT/pytest_gpu.txt" | cut -c1-160
echo "=== op table"; tail -1 "$OUT/pytest_ops.txt"; grep -E "^FAILED" "$OUT/pytest_ops.txt" | cut -c1-160 | head -30
echo "=== FlashAttention grid"; tail -1 "$OUT/pytest_flash.txt"; grep -E "^FAILED" "$OUT/pytest_flash.txt" | cut -c1-160
echo "=== MNIST"; for f in mlp cnn bf16; do grep -E "^epoch" "$OUT/mnist_$f.txt" | tail -1; done
echo "=== bfloat16 (the real-GPU tests: test_bfloat16_on_a_real_gpu, test_flash_primitive_on_a_real_gpu above)"
grep -E "bfloat16|bf16" "$OUT/pytest_gpu.txt" | grep -E "^(PASSED|FAILED|ERROR)" | cut -c1-160
$PY - "$OUT/gpu_bf16_probe.json" <<'PYEOF' || tail -20 "$OUT/bf16_probe.txt"
import json, sys
r = json.load(open(sys.argv[1]))
print("CuPy on bfloat16:", ", ".join(f"{k}: {v}" for k, v in r.get("cupy", {}).items()))
for k, v in r.get("matmul", {}).items():
    print(f"matmul {k}: {v}")
t = r.get("op_table", {})
print(f"op table on bf16 GPU arrays: {t.get('failing')} of {t.get('rows')} rows fail")
for k, v in list(t.get("failures", {}).items())[:15]:
    print(f"  [{len(v)}] {k[:140]}: {' '.join(v[:8])}")
PYEOF
echo "=== benchmarks"; sed -n "/^run_all:/,\$p" "$OUT/bench.txt"
echo "then: cp $OUT/gpu_*.json benchmarks/results/ && python benchmarks/render.py"
