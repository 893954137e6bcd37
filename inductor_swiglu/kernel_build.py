"""Build the CUTLASS SM90 kernels in ``csrc/`` into one torch-independent shared library.

This module imports nothing from torch (``setup.py`` loads it by path), so the
library can be built on a machine with ``nvcc`` and no GPU, and the result loads
under any torch version: the kernels talk to Python through the C ABI in
``csrc/swiglu_api.h`` only.

Each ``csrc/*.cu`` file is one translation unit, compiled in parallel (nvcc's
front end is single-threaded and takes 1.5-2 minutes per CUTLASS kernel), with
objects cached under ``build/kernels/`` by a hash of the sources and flags, so a
rebuild only recompiles what changed.

Command line::

    python -m inductor_swiglu.kernel_build [--out DIR] [--jobs N]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LIB_NAME = "libinductor_swiglu_sm90.so"
REPO_ROOT = Path(__file__).resolve().parent.parent
CSRC = REPO_ROOT / "csrc"

# sm_90a, not sm_90: wgmma and setmaxnreg only exist on the "a" target.
# No --use_fast_math: SiLU uses expf and a true division, which is what keeps the
# fused kernels within rounding of the fp32 reference.
NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-DNDEBUG",
    "--expt-relaxed-constexpr",
    "-ftemplate-backtrace-limit=0",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-fvisibility=hidden",
    "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
    "-Xptxas=--warn-on-spills",
]


class BuildError(RuntimeError):
    pass


def find_nvcc() -> str | None:
    env = os.environ.get("NVCC")
    if env:
        return env
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return str(Path(home) / "bin" / "nvcc")
    return None


def find_cutlass() -> Path | None:
    """CUTLASS headers: $CUTLASS_PATH, else the `nvidia-cutlass` wheel (4.2.0.0)."""
    env = os.environ.get("CUTLASS_PATH")
    if env and (Path(env) / "include" / "cutlass" / "cutlass.h").exists():
        return Path(env)
    try:
        import importlib.util

        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        spec = None
    candidates = []
    if spec and spec.submodule_search_locations:
        candidates.append(Path(list(spec.submodule_search_locations)[0]))
    # Under pip's build isolation the target environment's packages are hidden
    # from sys.path, but sysconfig still names its site-packages.
    import sysconfig

    for key in ("purelib", "platlib"):
        candidates.append(Path(sysconfig.get_paths()[key]) / "cutlass_library")
    for pkg in candidates:
        src = pkg / "source"
        if (src / "include" / "cutlass" / "cutlass.h").exists():
            return src
    return None


def _sources() -> list[Path]:
    return sorted(p for p in CSRC.glob("*.cu")) + sorted(CSRC.glob("*.cpp"))


def _headers() -> list[Path]:
    return sorted(list(CSRC.rglob("*.h")) + list(CSRC.rglob("*.hpp")) + list(CSRC.rglob("*.cuh")))


def _key(src: Path, flags: list[str], nvcc_version: str) -> str:
    h = hashlib.sha256()
    h.update(nvcc_version.encode())
    h.update(" ".join(flags).encode())
    for f in [src, *_headers()]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def build(out_dir: Path | None = None, jobs: int | None = None, verbose: bool = True) -> Path:
    """Compile csrc/ and link the shared library; returns its path.  Raises BuildError."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("nvcc not found (set NVCC or CUDA_HOME, or put nvcc on PATH)")
    cutlass = find_cutlass()
    if cutlass is None:
        raise BuildError(
            "CUTLASS headers not found: `pip install --no-deps nvidia-cutlass==4.2.0.0` "
            "or set CUTLASS_PATH to a CUTLASS source tree"
        )
    sources = _sources()
    if not sources:
        raise BuildError(f"no kernel sources in {CSRC}")
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    includes = [f"-I{CSRC}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools' / 'util' / 'include'}"]
    flags = NVCC_FLAGS + includes
    obj_dir = REPO_ROOT / "build" / "kernels"
    obj_dir.mkdir(parents=True, exist_ok=True)
    out_dir = Path(out_dir) if out_dir else REPO_ROOT / "inductor_swiglu" / "_lib"
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = jobs or max(1, os.cpu_count() or 1)

    def log(msg: str) -> None:
        if verbose:
            print(f"[inductor_swiglu build] {msg}", file=sys.stderr, flush=True)

    todo, objects = [], []
    for src in sources:
        obj = obj_dir / f"{src.stem}-{_key(src, flags, nvcc_version)}.o"
        objects.append(obj)
        if not obj.exists():
            todo.append((src, obj))
    log(f"{len(sources)} translation units, {len(todo)} to compile with {jobs} jobs "
        f"(CUTLASS {cutlass}); about 2 minutes each on one core")

    def compile_one(src: Path, obj: Path) -> tuple[Path, float]:
        t0 = time.time()
        tmp = obj.with_suffix(".o.tmp")
        cmd = [nvcc, *flags, "-c", str(src), "-o", str(tmp)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise BuildError(f"compiling {src.name} failed:\n{' '.join(cmd)}\n{res.stdout}{res.stderr}")
        if res.stderr.strip():
            # ptxas spill warnings and the like: show them, they matter for speed
            log(f"{src.name}: {res.stderr.strip()}")
        tmp.replace(obj)
        return src, time.time() - t0

    t_start = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(compile_one, s, o) for s, o in todo]
        for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            src, dt = fut.result()
            log(f"[{i}/{len(todo)}] {src.name} compiled in {dt:.0f} s "
                f"({time.time() - t_start:.0f} s elapsed)")
    lib = out_dir / LIB_NAME
    tmp = lib.with_suffix(".so.tmp")
    cmd = [nvcc, "-shared", "-cudart=static", "-gencode=arch=compute_90a,code=sm_90a",
           *[str(o) for o in objects], "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError(f"linking failed:\n{' '.join(cmd)}\n{res.stdout}{res.stderr}")
    tmp.replace(lib)
    log(f"wrote {lib} ({lib.stat().st_size / 1e6:.1f} MB)")
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="directory for the .so (default: the package's _lib/)")
    ap.add_argument("--jobs", type=int, default=None, help="parallel nvcc processes (default: all cores)")
    args = ap.parse_args(argv)
    try:
        build(args.out, args.jobs)
    except BuildError as e:
        print(f"[inductor_swiglu build] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
