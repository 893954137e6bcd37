#!/usr/bin/env bash
# Device call: GPU tests, a diagnostics dump of the Qwen2.5-shaped model, the model benchmark.
# Everything lands in /tmp/res, packed into $OUT/results.tgz; key summaries copied to $OUT.
set -uo pipefail
R=/tmp/res; mkdir -p $R; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
OUT=$R bash benchmarks/device_run.sh tests > $R/tests.out 2>&1; tail -3 $R/tests.out
echo "== $(date +%T) diagnose"
timeout 240 python3 -m inductor_swiglu diagnose --out $R/qwen25_dump examples/diagnose_qwen25.py > $R/diagnose.out 2>&1; echo "diagnose rc=$?"
cp $R/qwen25_dump/summary.md $OUT/diag_summary.md 2>/dev/null; tail -5 $R/diagnose.out
echo "== $(date +%T) model benchmark"
timeout ${MODEL_TIMEOUT:-300} python3 benchmarks/bench_model.py --out $R --reps 10 --prompts 2 > $R/model.out 2>&1; echo "model rc=$?"
tail -12 $R/model.out; cp $R/bench_model.md $R/bench_model.json $OUT/ 2>/dev/null
tar czf $OUT/results.tgz -C $R .
