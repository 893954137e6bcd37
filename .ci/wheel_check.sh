#!/usr/bin/env bash
# The wheel as a user gets it: built once from this checkout, installed (not editable) into a fresh
# venv with no source tree beside it, then imported and run from there (.ci/wheel_smoke.py: every
# module imports, the kernel library and the C++ op load from site-packages, a CPU compile rewrites).
#
#   bash .ci/wheel_check.sh BUILD_PYTHON         build with BUILD_PYTHON (a venv with torch, and
#                                                nvidia-cutlass where nvcc exists: make install's), check it
#   WHEEL=dist/inductor_swiglu-...whl bash .ci/wheel_check.sh    check a wheel built elsewhere
#   TORCH=torch==2.11.0                          the fresh venv's torch (default torch==2.13.0)
#   KERNELS=1|0                                  whether the wheel must carry the libraries
#                                                (default: where nvcc is found)
#
# The build reuses the kernel objects an earlier build cached under build/kernels (make install's),
# so with them it only links.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
TORCH=${TORCH:-torch==2.13.0}
PYTHON=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/dist"

has_nvcc() {
    [[ -n "${NVCC:-}" ]] || command -v nvcc >/dev/null ||
        [[ -x "${CUDA_HOME:-/nonexistent}/bin/nvcc" || -x "${CUDA_PATH:-/nonexistent}/bin/nvcc" || -x /usr/local/cuda/bin/nvcc ]]
}

if [[ -n "${WHEEL:-}" ]]; then
    cp "$WHEEL" "$work/dist/"
    [[ "$WHEEL" == *-py3-none-any.whl ]] && KERNELS=${KERNELS:-0} || KERNELS=${KERNELS:-1}
else
    build_py=${1:?usage: bash .ci/wheel_check.sh BUILD_PYTHON (or WHEEL=path)}
    if [[ -z "${KERNELS:-}" ]]; then has_nvcc && KERNELS=1 || KERNELS=0; fi
    if [[ $KERNELS == 1 ]]; then
        export INDUCTOR_SWIGLU_REQUIRE_KERNELS=1; unset INDUCTOR_SWIGLU_SKIP_KERNELS
    else
        export INDUCTOR_SWIGLU_SKIP_KERNELS=1; unset INDUCTOR_SWIGLU_REQUIRE_KERNELS
    fi
    echo "== building the wheel (kernels: $KERNELS) =="
    "$build_py" -m pip install -q build "setuptools>=77"
    # setuptools stages the package in build/lib and keeps it between builds: a module since
    # deleted from the sources would reach the wheel
    rm -rf build/lib build/bdist.*
    # no isolation: the kernels' build needs the torch headers and CUTLASS of build_py's venv
    "$build_py" -m build --wheel --no-isolation --outdir "$work/dist" . 2>&1 | tee "$work/build.log" \
        | grep --line-buffered -E "inductor_swiglu build|Successfully built|rror" || true
    grep -q "Successfully built" "$work/build.log" || { tail -n 60 "$work/build.log"; exit 1; }
fi

wheel=$(ls "$work"/dist/inductor_swiglu-*.whl)
plat=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_platform().replace('-', '_').replace('.', '_'))")
libs=$("$PYTHON" -c "import sys, zipfile; print(sorted(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith('.so')))" "$wheel")
echo "== $(basename "$wheel"): libraries $libs =="
if [[ $KERNELS == 1 ]]; then
    [[ "$wheel" == *-py3-none-"$plat".whl ]] || { echo "a wheel with libraries must be tagged py3-none-$plat"; exit 1; }
    [[ $libs == *"_lib/libinductor_swiglu_sm90.so"* && $libs == *"_lib/libinductor_swiglu_op.so"* ]] \
        || { echo "the wheel lacks a library"; exit 1; }
else
    [[ "$wheel" == *-py3-none-any.whl && $libs == "[]" ]] || { echo "a wheel without kernels must be pure"; exit 1; }
fi

echo "== installing it into a fresh venv ($TORCH) =="
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$TORCH"
"$work/venv/bin/python" -m pip install -q "$wheel"
cp .ci/wheel_smoke.py "$work/"
# -I: no PYTHONPATH or user site, nothing but the venv: what a GPU machine that installs it has
cd "$work" && ./venv/bin/python -I wheel_smoke.py "$([[ $KERNELS == 1 ]] && echo kernels || echo pure)"
cd "$root"
