#!/usr/bin/env bash
# One device call for new Kernel-2 configs: smoke each new config in its own process (a hang
# or fault stays contained), the GPU kernel tests that cover them, then the kernel benchmark at
# small M (where Kernel-2 is dispatched) in two halves so a timeout keeps the first.
set -uo pipefail
R=/tmp/rk; mkdir -p $R; export PYTHONUNBUFFERED=1
INDUCTOR_SWIGLU_SKIP_KERNELS=1 python3 -m pip install -q --no-build-isolation --no-deps -e . > $R/install.log 2>&1
for c in ${K2_NEW_CONFIGS:-3 4 5 6}; do
  echo "== smoke kernel2 config $c"; timeout 90 python3 benchmarks/kernel_smoke.py 2 $c 2>&1 | tail -12
done | tee $R/smoke.log
echo "== tests"
timeout 200 python3 -m pytest -q tests/gpu/test_kernels.py -p no:cacheprovider -k "every_config or wave_sized or stream_k or cuda_graph or dispatched" 2>&1 | tail -15 | tee $R/tests.log
echo "== bench small"
timeout 170 python3 benchmarks/bench_kernels.py --out $R/b1 --models q0.5B,q1.5B,q3B --ms 1,16,128,512 --no-compile 2>&1 | grep "^\[" | tee $R/bench1.log
echo "== bench large"
timeout 170 python3 benchmarks/bench_kernels.py --out $R/b2 --models q7B,q14B,q32B,q72B --ms 1,16,128,512 --no-compile 2>&1 | grep "^\[" | tee $R/bench2.log
tar czf $OUT/rk.tgz -C $R .
