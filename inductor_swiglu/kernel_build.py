"""Build ``csrc/`` into two shared libraries, on a machine with ``nvcc`` and no GPU.

1. ``libinductor_swiglu_sm90.so``: the kernels (CUTLASS SM90 Kernels 1 and 2, the
   decode Kernel-3, the elementwise epilogue of the unfused path) behind the C
   ABI of ``csrc/swiglu_api.h``.  No torch in it: it loads under any torch.
2. ``libinductor_swiglu_op.so``: the op ``inductor_swiglu::swiglu_forward`` in
   C++ (``csrc/op/``), built against torch's Stable ABI headers with
   ``TORCH_TARGET_VERSION`` = 2.11, so one build serves torch 2.11 and later.  It
   links the kernel library and needs torch's headers at build time (the
   installed torch, found without importing it); without them it is skipped and
   the op runs its Python implementation, which says so.

This module imports nothing from torch (``setup.py`` loads it by path).  Each
``csrc/*.cu`` file is one translation unit, compiled in parallel (nvcc's front
end is single-threaded and takes 1-2 minutes per CUTLASS kernel), with objects
cached under ``build/kernels/`` by a hash of the sources and flags, so a rebuild
only recompiles what changed.  Kernel-2's and Kernel-3's configurations are generated
from the tables in ``kernel_configs.py`` into ``build/generated/``.

Command line::

    python -m inductor_swiglu.kernel_build [--out DIR] [--jobs N]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

LIB_NAME = "libinductor_swiglu_sm90.so"
OP_LIB_NAME = "libinductor_swiglu_op.so"
REPO_ROOT = Path(__file__).resolve().parent.parent
CSRC = REPO_ROOT / "csrc"
GEN_DIR = REPO_ROOT / "build" / "generated"

# No --use_fast_math: it would also flush denormals and approximate every division and
# sqrt; the activations pick their fast forms themselves (activation.hpp).
NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-DNDEBUG",
    "--expt-relaxed-constexpr",
    "-ftemplate-backtrace-limit=0",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-fvisibility=hidden",
    "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
    "-Xptxas=--warn-on-spills",
    # a register array indexed at run time lives in local memory without any spill being reported
    # (Kernel-2's interleave-of-4 epilogue did, 672 bytes a thread: 2026-12-02); see LOCAL_MEMORY_ALLOWED
    "-Xptxas=--warn-on-local-memory-usage",
]
# Translation units whose kernels may use local memory, and why; in any other, a kernel that does
# fails the build (local memory is DRAM traffic through L1/L2, never what an epilogue meant).
LOCAL_MEMORY_ALLOWED = {
    # the activation a run-time argument: three activations' copies of the staging loop in the
    # _tma and _rows rows (48-312 bytes a thread, 2026-12-02), measured faster than their register
    # twins all the same (benchmarks/RESULTS.md)
    "kernel2_pairmul_geglu.cu",
    # two mma.sync rows spill 4 bytes (8-byte stack frame)
    "kernel3_skinny.cu",
}
# sm_90a, not sm_90: wgmma, setmaxnreg and griddepcontrol only exist on the "a" target.  The
# epilogue of the unfused path runs wherever the op does (sm_80 and newer, PTX for later GPUs).
SM90A = ["-gencode=arch=compute_90a,code=sm_90a"]
PORTABLE = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
            "-gencode=arch=compute_90,code=compute_90"]
ARCH_FLAGS = {"gated_mul.cu": PORTABLE}   # every other translation unit: SM90A

# The op library targets the oldest torch whose Stable ABI it needs (torch_call_dispatcher and
# torch_library_impl are 2.10; 2.11 is the oldest torch the package supports).
TORCH_TARGET_VERSION = "0x020b000000000000"   # 2.11
CXX_FLAGS = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"]


# nvcc's front end (cicc) peaks near 12 GB on each Kernel-2 translation unit (46 CUTLASS instantiations);
# two at once on a 24 GB machine without swap thrash for many minutes instead of taking four.
PEAK_GB_PER_JOB = 12


class BuildError(RuntimeError):
    pass


def local_memory_functions(ptxas_output: str) -> list[str]:
    """The functions ptxas says use local memory (--warn-on-local-memory-usage), in its order."""
    return re.findall(r"Local memory used for function '([^']+)'", ptxas_output)


def default_jobs(meminfo: str = "/proc/meminfo", cores: int | None = None) -> int:
    """One nvcc per core, as many as the available memory holds at PEAK_GB_PER_JOB each."""
    cores = max(1, cores or os.cpu_count() or 1)
    try:
        with open(meminfo) as f:
            avail_kb = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return cores
    return max(1, min(cores, avail_kb // (PEAK_GB_PER_JOB << 20)))


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


def find_torch() -> Path | None:
    """The installed torch package (headers under include/, libraries under lib/), not imported."""
    candidates = []
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec and spec.submodule_search_locations:
        candidates.append(Path(list(spec.submodule_search_locations)[0]))
    for key in ("purelib", "platlib"):   # under pip's build isolation, as for CUTLASS
        candidates.append(Path(sysconfig.get_paths()[key]) / "torch")
    for pkg in candidates:
        if (pkg / "include" / "torch" / "csrc" / "stable" / "library.h").exists() and (pkg / "lib").is_dir():
            return pkg
    return None


def _load_configs():
    """kernel_configs.py by path (this module must not import the package, which imports torch)."""
    name = "_isw_kernel_configs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "kernel_configs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod   # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def generate() -> list[Path]:
    """Write the generated includes (only when their text changes, so objects stay cached)."""
    GEN_DIR.mkdir(parents=True, exist_ok=True)
    configs = _load_configs()
    written = []
    for name, text in (("kernel2_configs.inc", configs.kernel2_include()), ("kernel3_configs.inc", configs.kernel3_include()),
                       ("kernel3w_configs.inc", configs.kernel3w_include())):
        path = GEN_DIR / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def _sources() -> list[Path]:
    return sorted(p for p in CSRC.glob("*.cu")) + sorted(CSRC.glob("*.cpp"))


def _headers() -> list[Path]:
    # csrc/tools/ holds the host-only checks and their helpers, which no library unit includes
    tools = CSRC / "tools"
    return sorted(p for ext in ("*.h", "*.hpp", "*.cuh") for p in CSRC.rglob(ext) if tools not in p.parents)


def included_sources(src: Path) -> list[Path]:
    """src and the csrc/*.cu files it includes (kernel2_pairmul_geglu.cu builds kernel2_pairmul.cu again)."""
    text = src.read_text(errors="replace")
    return [src, *sorted(p for p in CSRC.glob("*.cu") if p != src and f'"{p.name}"' in text)]


def generated_for(src: Path) -> list[Path]:
    """The generated includes a source uses (so a new config rebuilds Kernel-3 only)."""
    text = "".join(p.read_text(errors="replace") for p in included_sources(src))
    return sorted(p for p in GEN_DIR.glob("*.inc") if p.name in text)


def _key(src: Path, flags: list[str], nvcc_version: str) -> str:
    h = hashlib.sha256()
    h.update(nvcc_version.encode())
    h.update(" ".join(flags).encode())
    for f in [*included_sources(src), *_headers(), *generated_for(src)]:
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
    generate()
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    includes = [f"-I{CSRC}", f"-I{GEN_DIR}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools' / 'util' / 'include'}"]
    flags = NVCC_FLAGS + includes

    def flags_of(src: Path) -> list[str]:
        return flags + ARCH_FLAGS.get(src.name, SM90A)
    obj_dir = REPO_ROOT / "build" / "kernels"
    obj_dir.mkdir(parents=True, exist_ok=True)
    out_dir = Path(out_dir) if out_dir else REPO_ROOT / "inductor_swiglu" / "_lib"
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = jobs or default_jobs()

    def log(msg: str) -> None:
        if verbose:
            print(f"[inductor_swiglu build] {msg}", file=sys.stderr, flush=True)

    todo, objects = [], []
    for src in sources:
        obj = obj_dir / f"{src.stem}-{_key(src, flags_of(src), nvcc_version)}.o"
        objects.append(obj)
        if not obj.exists():
            todo.append((src, obj))
    log(f"{len(sources)} translation units, {len(todo)} to compile with {jobs} job(s) "
        f"(one per core and per {PEAK_GB_PER_JOB} GB of available memory; CUTLASS {cutlass}); "
        f"up to 4 minutes each on one core")

    def compile_one(src: Path, obj: Path) -> tuple[Path, float]:
        t0 = time.time()
        tmp = obj.with_suffix(".o.tmp")
        cmd = [nvcc, *flags_of(src), "-c", str(src), "-o", str(tmp)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise BuildError(f"compiling {src.name} failed:\n{' '.join(cmd)}\n{res.stdout}{res.stderr}")
        if res.stderr.strip():
            # ptxas spill warnings and the like: show them, they matter for speed
            log(f"{src.name}: {res.stderr.strip()}")
        lmem = local_memory_functions(res.stderr)
        if lmem and src.name not in LOCAL_MEMORY_ALLOWED:
            raise BuildError(f"{src.name}: {len(lmem)} kernel(s) use local memory (a register array indexed at run "
                             f"time, or spills), e.g. {lmem[0][:200]}; see kernel_build.LOCAL_MEMORY_ALLOWED")
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
    cmd = [nvcc, "-shared", "-cudart=static", *SM90A, *[str(o) for o in objects], "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError(f"linking failed:\n{' '.join(cmd)}\n{res.stdout}{res.stderr}")
    tmp.replace(lib)
    log(f"wrote {lib} ({lib.stat().st_size / 1e6:.1f} MB)")
    return lib


def build_op(out_dir: Path | None = None, verbose: bool = True) -> Path:
    """Compile csrc/op/ against torch's Stable ABI and link it to the kernel library in out_dir."""
    out_dir = Path(out_dir) if out_dir else REPO_ROOT / "inductor_swiglu" / "_lib"
    kernel_lib = out_dir / LIB_NAME
    if not kernel_lib.exists():
        raise BuildError(f"{kernel_lib} does not exist: build the kernels first")
    torch_dir = find_torch()
    if torch_dir is None:
        raise BuildError("torch's headers were not found (install torch >= 2.11 first)")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise BuildError("no C++ compiler (set CXX)")
    src = CSRC / "op" / "swiglu_forward.cpp"
    flags = CXX_FLAGS + [f"-I{CSRC}", f"-I{torch_dir / 'include'}"]
    version = (torch_dir / "include" / "torch" / "headeronly" / "version.h")
    h = hashlib.sha256()
    for part in (" ".join(flags), subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout):
        h.update(part.encode())
    for f in [src, *_headers(), version]:
        if f.exists():
            h.update(f.read_bytes())
    obj_dir = REPO_ROOT / "build" / "kernels"
    obj_dir.mkdir(parents=True, exist_ok=True)
    obj = obj_dir / f"{src.stem}-{h.hexdigest()[:16]}.o"
    t0 = time.time()
    if not obj.exists():
        tmp = obj.with_suffix(".o.tmp")
        cmd = [cxx, *flags, "-c", str(src), "-o", str(tmp)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise BuildError(f"compiling {src.name} failed:\n{' '.join(cmd)}\n{res.stdout}{res.stderr}")
        tmp.replace(obj)
    lib = out_dir / OP_LIB_NAME
    tmp = lib.with_suffix(".so.tmp")
    # DT_NEEDED on the kernel library (found next to this one through $ORIGIN) and on
    # libtorch_cpu (already loaded by `import torch`, matched by its soname at load time).
    cmd = [cxx, "-shared", str(obj), f"-L{out_dir}", "-l:" + LIB_NAME, f"-L{torch_dir / 'lib'}", "-ltorch_cpu",
           "-Wl,-rpath,$ORIGIN", "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError(f"linking {OP_LIB_NAME} failed:\n{' '.join(cmd)}\n{res.stdout}{res.stderr}")
    tmp.replace(lib)
    if verbose:
        print(f"[inductor_swiglu build] wrote {lib} against torch headers in {torch_dir} "
              f"(Stable ABI, target 2.11) in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="directory for the .so (default: the package's _lib/)")
    ap.add_argument("--jobs", type=int, default=None, help=f"parallel nvcc processes (default: one per core and per {PEAK_GB_PER_JOB} GB of available memory)")
    args = ap.parse_args(argv)
    try:
        build(args.out, args.jobs)
        build_op(args.out)
    except BuildError as e:
        print(f"[inductor_swiglu build] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
