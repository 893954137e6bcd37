"""Build ``csrc/`` into two shared libraries, on a machine with ``nvcc`` and no GPU.

1. ``libinductor_swiglu_sm90.so``: the kernels (``csrc/kernels/``: the dual, interleaved and
   decode GEMMs for SM90, the elementwise epilogue of the unfused path) behind the C ABI of
   ``csrc/api/swiglu_api.h``.  No torch in it: it loads under any torch.
2. ``libinductor_swiglu_op.so``: the op ``inductor_swiglu::swiglu_forward`` in C++
   (``csrc/op/``), built against torch's Stable ABI headers with ``TORCH_TARGET_VERSION`` =
   2.11, so one build serves torch 2.11 and later.  It links the kernel library and needs
   torch's headers at build time (the installed torch, found without importing it); without
   them it is skipped and the op runs its Python implementation, which says so.

What is compiled (``INDUCTOR_SWIGLU_KERNELS``):

* ``shipped`` (the default): the configurations the shipped dispatch tables
  (``dispatch/tables/*.json``) name, each kernel's first configuration (its default and the
  fallback of the others), and only the element types those tables serve.  A CUTLASS kernel
  costs 5-10 s of one core to compile; this is what a wheel holds (it serves every device).
* ``device``: the same, from only the tables that serve this machine's NVIDIA GPUs (read from
  ``nvidia-smi``, mapped by ``dispatch/devices.py`` as the dispatch maps them), so nothing the
  dispatch would choose here is missing.  Where no GPU can be named, or none present is a Hopper
  part a table serves, it is ``shipped`` (the log says why).  An install builds it where it builds
  only because a GPU is present (``install_kernel_set``).
* ``TABLE[+TABLE]`` (``h100``, ``h100+h200``: the stems of ``dispatch/tables/*.json``): what
  ``device`` builds on a machine with those GPUs, built where they are absent (an image or a
  wheel for H100 machines, built on a machine without one).
* ``all``: every configuration of ``kernels/configs.py`` for bf16 and fp16, for sweeps.
* ``shipped+KERNEL[+KERNEL]``: the shipped set and every configuration of the named kernels
  (``shipped+scaled_gemm``): a sweep of one kernel's table without building all of them.

This module imports nothing from torch (``setup.py`` loads it by path).  Each ``.cu`` file is one
translation unit; units run in parallel, as many as the cores and the available memory hold
(nvcc's front end takes 2-13 GB per CUTLASS unit, growing with its instantiations), longest
first.  Objects are cached under ``build/kernels/`` by a hash of the sources, generated
configuration lists and flags, so a rebuild compiles only what changed.  Generated into
``build/generated/``: the configuration lists (``kernels/configs.py``) and the C ABI's dtype and
activation enums (``kernels/vocabulary.py``, the ids Python reads).

Command line::

    python -m inductor_swiglu.kernels.build [--out DIR] [--jobs N] [--kernels shipped|device|h100|all]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import types
from collections.abc import Mapping
from pathlib import Path

LIB_NAME = "libinductor_swiglu_sm90.so"
OP_LIB_NAME = "libinductor_swiglu_op.so"
PACKAGE = Path(__file__).resolve().parent.parent
REPO_ROOT = PACKAGE.parent
CSRC = REPO_ROOT / "csrc"
GEN_DIR = REPO_ROOT / "build" / "generated"
OBJ_DIR = REPO_ROOT / "build" / "kernels"

# No --use_fast_math: it would also flush denormals and approximate every division and
# sqrt; the activations pick their fast forms themselves (epilogues/activation.hpp).
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
    # a register array indexed at run time lives in local memory without any spill being
    # reported; see LOCAL_MEMORY_ALLOWED
    "-Xptxas=--warn-on-local-memory-usage",
]
# Translation units whose kernels may use local memory, and why; in any other, a kernel that does
# fails the build (local memory is DRAM traffic through L1/L2, never what an epilogue meant).
LOCAL_MEMORY_ALLOWED = {
    # the activation a run-time argument: three activations' copies of the staging loop in the
    # staged-store rows (48-312 bytes a thread), measured faster than their register twins
    "interleaved_gemm_any_activation.cu",
    # two mma.sync rows spill 4 bytes (8-byte stack frame)
    "decode_mma.cu",
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

# nvcc's peak memory per unit, measured with nvcc 13.0 on the interleaved GEMM's unit: 2.5 GB for
# one configuration (two kernels), 4.5 GB for four (eight); CUTLASS kernels cost ~0.3 GB each.
PEAK_GB_BASE = 1.9
PEAK_GB_PER_KERNEL = 0.33
# and its time on one core, fitted to the units' compile times with nvcc 13.0 on a 2-core machine
# (one unit per core; with a unit on each of many cores every unit takes longer, sharing the memory
# bandwidth), to order and size the units: a fixed cost per unit for the headers, then a cost per
# kernel that depends on the family (the interleaved GEMM's epilogue pairs rows and costs the most;
# the decode GEMM's tiles are small)
SECONDS_BASE = 45
SECONDS_PER_KERNEL = 7
SECONDS_PER_KERNEL_OF = {"interleaved_gemm.cu": 7, "interleaved_gemm_any_activation.cu": 7.5, "scaled_gemm.cu": 6.5,
                         "decode_wgmma.cu": 3, "dual_gemm.cu": 6.5, "dgated_gemm.cu": 8}

# The kernel families a build may compile in several translation units (csrc/api/config_shards.hpp),
# by source, with the entry swiglu_api.cu routes each shard's configurations through.
SHARDED_ENTRIES = {
    "dual_gemm.cu": "dual_gemm_entry",
    "interleaved_gemm.cu": "interleaved_gemm_entry",
    "interleaved_gemm_any_activation.cu": "interleaved_gemm_any_act_entry",
    "scaled_gemm.cu": "scaled_gemm_entry",
    "decode_wgmma.cu": "decode_wgmma_entry",
}
SHARDS_INCLUDE = "kernel_shards.inc"

KERNEL_SETS = ("shipped", "device", "all")
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")


class BuildError(RuntimeError):
    pass


def failure(what: str, cmd: list[str], res: subprocess.CompletedProcess) -> BuildError:
    """The error for a compiler run that failed, its cause on the first line: pip shows only that
    line of a build's warning, and a compiler killed for memory prints nothing at all."""
    if res.returncode < 0:
        sig = -res.returncode
        cause = f"{what} failed: the compiler was killed by signal {sig}" + (
            " (most likely out of memory: another build running beside this one? "
            "`python -m inductor_swiglu.kernels.build --jobs 1` compiles one unit at a time)"
            if sig == signal.SIGKILL else "")
    else:
        cause = f"{what} failed (exit status {res.returncode})"
    return BuildError(f"{cause}:\n{' '.join(cmd)}\n{res.stdout}{res.stderr}")


def _load_by_path(name: str, path: Path):
    """A torch-free module of this package by path (importing the package would import torch)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod   # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def configs_module():
    return _load_by_path("_isw_kernel_configs", PACKAGE / "kernels" / "configs.py")


def dispatch_module(name: str):
    """A torch-free module of dispatch/ (``table``, ``devices``), imported as a submodule of a
    stand-in package for dispatch/ whose __init__.py (which imports torch) never runs: devices.py's
    relative import of .table then finds the one table module the build reads too."""
    package = "_isw_dispatch"
    if package not in sys.modules:
        stand_in = types.ModuleType(package)
        stand_in.__path__ = [str(PACKAGE / "dispatch")]
        sys.modules[package] = stand_in
    return importlib.import_module(f"{package}.{name}")


def table_module():
    return dispatch_module("table")


def vocabulary_module():
    return _load_by_path("_isw_kernel_vocabulary", PACKAGE / "kernels" / "vocabulary.py")


# The GEMM kernels' element types, as bits of ISW_BUILD_DTYPES: 1 << isw_dtype
DTYPE_BITS = {name: 1 << vocabulary_module().ALL_DTYPE_IDS[name] for name in vocabulary_module().GEMM_DTYPES}


@dataclasses.dataclass(frozen=True)
class Selection:
    """What one build compiles: the rows of each kernel's table and the element types."""

    kernels: str                     # "shipped", "device", "all" or "shipped+KERNEL..."
    rows: dict                       # implementation name -> tuple of configuration rows
    dtypes: tuple[str, ...]          # "bfloat16", "float16"
    why: str = ""                    # for "device": the GPUs and their tables, or why it fell back to shipped
    tables: tuple[str, ...] = ()     # the dispatch tables whose choices it holds ("all": none, it holds every row)

    @property
    def dtype_mask(self) -> int:
        return sum(DTYPE_BITS[d] for d in self.dtypes)

    def kernels_in(self, unit: str) -> int:
        """How many kernels a translation unit instantiates (for its memory and time estimate)."""
        configs = configs_module()
        n = len(self.dtypes)
        if unit.startswith("interleaved_gemm"):
            return n * len({configs.compiled_kernel(r) for r in self.rows["interleaved_gemm"]})
        if unit == "scaled_gemm.cu":   # bf16 out only
            return len({configs.compiled_kernel(r) for r in self.rows["scaled_gemm"]})
        if unit == "dual_gemm.cu":
            return n * len(self.rows["dual_gemm"])
        if unit == "decode_wgmma.cu":
            return n * sum(1 for r in self.rows["decode_gemm"] if isinstance(r, configs.DecodeWgmmaConfig))
        if unit == "dgated_gemm.cu":   # bf16 only
            return len(self.rows["dgated_gemm"])
        return 0   # no CUTLASS templates: seconds, a few hundred MB


def device_table_names() -> list[str]:
    """The shipped dispatch tables' names (``h100``, ``h200``), each a kernel set of its own."""
    return sorted(p.stem for p in table_module().TABLES_DIR.glob("*.json"))


def named_tables(value: str) -> list[str] | None:
    """The tables a kernel set names (``h100+h200``), or None where it names none."""
    names = value.split("+")
    return names if all(n in device_table_names() for n in names) else None


def check_kernel_set(value: str) -> str:
    """`value` if it names a kernel set (the module docstring), else BuildError."""
    base, *whole = value.split("+")
    kernels = configs_module().TABLES
    shipped_plus = base == "shipped" and all(k in kernels for k in whole)
    if not (base in KERNEL_SETS and not whole or shipped_plus or named_tables(value)):
        raise BuildError(f"INDUCTOR_SWIGLU_KERNELS={value!r}: expected one of {', '.join(KERNEL_SETS)}, "
                         f"shipped+KERNEL[+KERNEL] with KERNEL in {', '.join(kernels)}, or "
                         f"TABLE[+TABLE] with TABLE in {', '.join(device_table_names())}")
    return value


def kernel_set(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return check_kernel_set(env.get("INDUCTOR_SWIGLU_KERNELS", "shipped").strip().lower() or "shipped")


def build_asked(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for the kernels whatever the machine (INDUCTOR_SWIGLU_BUILD_KERNELS:
    a wheel; INDUCTOR_SWIGLU_REQUIRE_KERNELS: CI)."""
    return any(env.get(f"INDUCTOR_SWIGLU_{what}_KERNELS", "") not in ("", "0") for what in ("BUILD", "REQUIRE"))


def install_kernel_set(env: Mapping[str, str], gpu_present: bool) -> str:
    """The kernel set an install builds (setup.py): $INDUCTOR_SWIGLU_KERNELS where set; ``device``
    where it builds only because this machine has a GPU (its tables' kernels are all it can run);
    ``shipped`` where asked to build (INDUCTOR_SWIGLU_BUILD_KERNELS: a wheel, which serves every
    device; INDUCTOR_SWIGLU_REQUIRE_KERNELS: CI)."""
    if env.get("INDUCTOR_SWIGLU_KERNELS", "").strip():
        return kernel_set(env)
    return "device" if gpu_present and not build_asked(env) else "shipped"


Gpu = tuple[str, tuple[int, int] | None]   # (name, compute capability; None where unknown)


def gpus_from_smi(text: str) -> list[Gpu]:
    """The GPUs in `nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader` output
    ("NVIDIA H100 80GB HBM3, 9.0" a line)."""
    gpus = []
    for line in text.splitlines():
        name, _, cap = line.rpartition(",")
        major, _, minor = cap.strip().partition(".")
        if name.strip():
            gpus.append((name.strip(), (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None))
    return gpus


def model_from_driver(text: str) -> str | None:
    """The GPU's name in the driver's /proc/driver/nvidia/gpus/*/information ("Model: ...")."""
    m = re.search(r"^Model:\s*(.+?)\s*$", text, re.M)
    return m.group(1) if m else None


def present_gpus(driver_gpus: Path = DRIVER_GPUS) -> list[Gpu]:
    """This machine's NVIDIA GPUs, read without torch: from nvidia-smi, else by name alone from the
    driver (an nvidia-smi too old for compute_cap, or none on the PATH)."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            res = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            res = None
        named = gpus_from_smi(res.stdout) if res is not None and res.returncode == 0 else []
        if named:
            return named
    gpus = []
    for info in sorted(driver_gpus.glob("*/information")) if driver_gpus.is_dir() else []:
        try:
            name = model_from_driver(info.read_text(errors="replace"))
        except OSError:
            name = None
        if name:
            gpus.append((name, None))
    return gpus


def device_tables(gpus: list[Gpu]) -> tuple[dict | None, str]:
    """The tables that serve `gpus`, by the kind that names each (dispatch/devices.py decides, as
    the dispatch does: a kind's own table completed by its nearest kind's, or the nearest kind's),
    and what each GPU maps to in words; None where no GPU is named or none has a table."""
    if not gpus:
        return None, f"no NVIDIA GPU could be named (nvidia-smi, {DRIVER_GPUS})"
    devices, table = dispatch_module("devices"), table_module()
    served, said = {}, []
    for name, capability in dict.fromkeys(gpus):
        if capability is None:
            said.append(f"{name}: compute capability unknown")
            continue
        kind = devices.kind_of(name, capability)
        if kind.table is None:
            said.append(f"{name} ({kind.name}): no table" + ("" if kind.hopper else ", not Hopper"))
            continue
        served[kind.table] = table.completed_table(kind.table)[0]
        said.append(f"{name} → the {kind.table.upper()} table")
    return served or None, "; ".join(said)


def select(kernels: str | None = None) -> Selection:
    """The configurations and element types to build (see the module docstring)."""
    kernels = check_kernel_set(kernels) if kernels else kernel_set()
    configs = configs_module()
    if kernels == "all":
        return Selection(kernels, configs.select(None), tuple(DTYPE_BITS))
    tables, why = device_tables(present_gpus()) if kernels == "device" else (None, "")
    if kernels == "device" and tables is None:
        kernels, why = "shipped", f"device → shipped: {why}"
    whole: list[str] = kernels.split("+")[1:]
    if names := named_tables(kernels):
        tables = {name: table_module().completed_table(name)[0] for name in names}
        why, whole = " and ".join(f"the {name.upper()} table" for name in tables), []
    if tables is None:
        tables = table_module().shipped()
    used: dict[str, set[str]] = {impl: {r.name for r in configs.TABLES[impl]} for impl in whole}
    dtypes: set[str] = set()
    for t in tables.values():
        for impl, names in t.configs_used().items():
            used.setdefault(impl, set()).update(names)
        dtypes |= t.dtypes_served() & set(DTYPE_BITS)
    try:
        rows = configs.select(used)
    except ValueError as e:
        raise BuildError(f"a shipped dispatch table names a configuration kernels/configs.py lacks: {e}") from e
    return Selection(kernels, rows, tuple(d for d in DTYPE_BITS if d in dtypes) or ("bfloat16",), why,
                     tuple(sorted(tables)))


def local_memory_functions(ptxas_output: str) -> list[str]:
    """The functions ptxas says use local memory (--warn-on-local-memory-usage), in its order."""
    return re.findall(r"Local memory used for function '([^']+)'", ptxas_output)


def available_gb(meminfo: str = "/proc/meminfo") -> float | None:
    try:
        with open(meminfo) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:")) / (1 << 20)
    except (OSError, StopIteration, ValueError):
        return None


def peak_gb(kernels: int) -> float:
    return PEAK_GB_BASE + PEAK_GB_PER_KERNEL * kernels


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


def _site_candidates(package: str) -> list[Path]:
    """Where an installed package may live, also under pip's build isolation (which hides the
    target environment's packages from sys.path while sysconfig still names its site-packages)."""
    candidates = []
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec and spec.submodule_search_locations:
        candidates.append(Path(list(spec.submodule_search_locations)[0]))
    for key in ("purelib", "platlib"):
        candidates.append(Path(sysconfig.get_paths()[key]) / package)
    return candidates


def find_cutlass() -> Path | None:
    """CUTLASS headers: $CUTLASS_PATH, else the `nvidia-cutlass` wheel (4.2.0.0)."""
    env = os.environ.get("CUTLASS_PATH")
    if env and (Path(env) / "include" / "cutlass" / "cutlass.h").exists():
        return Path(env)
    for pkg in _site_candidates("cutlass_library"):
        if (pkg / "source" / "include" / "cutlass" / "cutlass.h").exists():
            return pkg / "source"
    return None


def cuda_gpu_present(driver_gpus: Path = DRIVER_GPUS) -> bool:
    """Whether this machine has an NVIDIA GPU the kernels could run on, read from the driver without
    importing torch: /proc/driver/nvidia/gpus lists one entry per GPU, or nvidia-smi names one."""
    if driver_gpus.is_dir() and any(driver_gpus.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        res = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and "GPU " in res.stdout


def find_torch() -> Path | None:
    """The installed torch package (headers under include/, libraries under lib/), not imported."""
    for pkg in _site_candidates("torch"):
        if (pkg / "include" / "torch" / "csrc" / "stable" / "library.h").exists() and (pkg / "lib").is_dir():
            return pkg
    return None


def usable_cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def shard_size(total: int, shards: int, shard: int) -> int:
    """The kernels of shard `shard` of `shards` when a family's `total` rows are dealt round-robin."""
    return total // shards + (1 if shard < total % shards else 0)


def unit_seconds(kernels: int, family: str = "") -> float:
    """A unit's estimated compile time on one core: `kernels` kernels of `family` (a source name)."""
    return SECONDS_BASE + SECONDS_PER_KERNEL_OF.get(family, SECONDS_PER_KERNEL) * kernels


def makespan(unit_times: list[float], cores: int) -> float:
    """The wall time of units started longest first, each on the first free core."""
    free = [0.0] * max(1, cores)
    for t in sorted(unit_times, reverse=True):
        i = free.index(min(free))
        free[i] += t
    return max(free)


def plan_shards(kernels: dict[str, int], cores: int) -> dict[str, int]:
    """How many translation units each sharded family compiles in on `cores` cores.

    Each unit pays the headers' fixed cost again, so a family is split only while that shortens the
    estimated wall time (``makespan``): starting from one unit per family, the family whose units
    are the longest is split once more, and the plan with the shortest makespan seen (the fewest
    units among equals) is kept.  Each family gets its own count, so a large family is cut finer
    than a small one; on two cores nothing is split, on sixteen the large families are."""
    families = {f: k for f, k in kernels.items() if k > 0}

    def longest(plan: dict[str, int], f: str) -> float:
        return unit_seconds(shard_size(families[f], plan[f], 0), f)

    def cost(plan: dict[str, int]) -> tuple[float, int]:
        times = [unit_seconds(shard_size(families[f], n, i), f) for f, n in plan.items() for i in range(n)]
        return makespan(times, cores), len(times)

    plan = {f: 1 for f in families}
    best, best_cost = plan, cost(plan)
    while families:
        f = max(plan, key=lambda f: longest(plan, f))
        if plan[f] >= families[f] or sum(plan.values()) >= 2 * max(1, cores):
            break
        plan = {**plan, f: plan[f] + 1}
        now = cost(plan)
        if now < best_cost:
            best, best_cost = plan, now
    return {f: best.get(f, 1) for f in kernels}


@dataclasses.dataclass(frozen=True)
class Unit:
    """One nvcc run: a source, or one shard of a sharded family's source."""

    src: Path
    shard: int = 0
    shards: int = 1

    @property
    def name(self) -> str:
        return self.src.name if self.shards == 1 else f"{self.src.name}[{self.shard + 1}/{self.shards}]"

    @property
    def stem(self) -> str:
        return self.src.stem if self.shards == 1 else f"{self.src.stem}-s{self.shard}of{self.shards}"

    def flags(self) -> list[str]:
        if self.src.name not in SHARDED_ENTRIES:
            return []
        return [f"-DISW_SHARD={self.shard}", f"-DISW_SHARDS={self.shards}"]

    def kernels(self, selection: Selection) -> int:
        """The kernels this unit instantiates (rows i with i % shards == shard)."""
        return shard_size(selection.kernels_in(self.src.name), self.shards, self.shard)


def plan_units(selection: Selection, cores: int) -> list[Unit]:
    plan = plan_shards({name: selection.kernels_in(name) for name in SHARDED_ENTRIES}, cores)
    return [Unit(src, k, plan.get(src.name, 1)) for src in sources() for k in range(plan.get(src.name, 1))]


def shards_include(units: list[Unit]) -> str:
    """kernel_shards.inc: each sharded family's shard entries, for swiglu_api.cu's routing."""
    lines = ["// Generated by inductor_swiglu/kernels/build.py: the shards of each kernel family (api/config_shards.hpp).",
             "namespace isw {"]
    for src_name, entry in SHARDED_ENTRIES.items():
        shards = sorted({u.shard for u in units if u.src.name == src_name})
        if not shards:
            continue
        lines += [f"extern const KernelEntry {entry}_shard{k};" for k in shards]
        lines.append(f"static const KernelEntry* const {entry}_shards[] = "
                     f"{{{', '.join(f'&{entry}_shard{k}' for k in shards)}}};")
    lines.append("}  // namespace isw")
    return "\n".join(lines) + "\n"


def write_generated(path: Path, text: str) -> Path:
    """Write a generated file only when its text changes, so objects stay cached."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def generate_vocabulary(out_dir: Path = GEN_DIR) -> Path:
    """The C ABI's enums (isw_dtype, isw_activation) from kernels/vocabulary.py."""
    vocabulary = vocabulary_module()
    return write_generated(out_dir / vocabulary.HEADER, vocabulary.header())


def generate(selection: Selection, out_dir: Path = GEN_DIR) -> list[Path]:
    """Write the generated configuration lists and the vocabulary header."""
    written = [write_generated(out_dir / name, text) for name, text in configs_module().includes(selection.rows).items()]
    return [*written, generate_vocabulary(out_dir)]


def sources() -> list[Path]:
    """The kernel library's translation units: the C ABI and one per kernel."""
    return sorted((CSRC / "api").glob("*.cu")) + sorted((CSRC / "kernels").glob("*.cu"))


def headers() -> list[Path]:
    # csrc/host_checks/ holds the host-only checks and their helpers, which no library unit includes
    checks = CSRC / "host_checks"
    own = sorted(p for ext in ("*.h", "*.hpp", "*.cuh") for p in CSRC.rglob(ext) if checks not in p.parents)
    return [*own, GEN_DIR / vocabulary_module().HEADER]   # swiglu_api.h includes it


def included_sources(src: Path) -> list[Path]:
    """src and the other .cu files it includes (interleaved_gemm_any_activation.cu builds
    interleaved_gemm.cu again)."""
    text = src.read_text(errors="replace")
    return [src, *sorted(p for p in sources() if p != src and f'/{p.name}"' in text)]


def generated_for(src: Path) -> list[Path]:
    """The generated includes a source uses (so a new decode configuration rebuilds that unit only)."""
    text = "".join(p.read_text(errors="replace") for p in included_sources(src))
    return sorted(p for p in GEN_DIR.glob("*.inc") if p.name in text)


def _key(src: Path, flags: list[str], nvcc_version: str) -> str:
    h = hashlib.sha256()
    h.update(nvcc_version.encode())
    h.update(" ".join(flags).encode())
    for f in [*included_sources(src), *headers(), *generated_for(src)]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


class _Progress:
    """One line per finished unit, and a line every `every` seconds while units compile, so a
    build of several minutes never looks stuck."""

    def __init__(self, log, every: float = 30.0) -> None:
        self.log, self.every = log, every
        self.running: dict[str, float] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self.done.wait(self.every):
            with self.lock:
                now = time.time()
                busy = ", ".join(f"{n} ({now - t:.0f} s)" for n, t in self.running.items())
            if busy:
                self.log(f"compiling {busy}")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()


def build(out_dir: Path | None = None, jobs: int | None = None, verbose: bool = True,
          kernels: str | None = None) -> Path:
    """Compile the kernel library and link it; returns its path.  Raises BuildError."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("nvcc not found (set NVCC or CUDA_HOME, or put nvcc on PATH)")
    cutlass = find_cutlass()
    if cutlass is None:
        raise BuildError(
            "CUTLASS headers not found: `pip install --no-deps nvidia-cutlass==4.2.0.0` "
            "or set CUTLASS_PATH to a CUTLASS source tree"
        )
    selection = select(kernels)
    generate(selection)
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    includes = [f"-I{CSRC}", f"-I{GEN_DIR}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools' / 'util' / 'include'}"]
    flags = NVCC_FLAGS + includes + [f"-DISW_BUILD_DTYPES={selection.dtype_mask}", "-DISW_SHARDED_BUILD"]
    cores = max(1, jobs or usable_cores())
    units = plan_units(selection, cores)
    write_generated(GEN_DIR / SHARDS_INCLUDE, shards_include(units))

    def flags_of(unit: Unit) -> list[str]:
        return flags + unit.flags() + ARCH_FLAGS.get(unit.src.name, SM90A)

    OBJ_DIR.mkdir(parents=True, exist_ok=True)
    out_dir = Path(out_dir) if out_dir else PACKAGE / "_lib"
    out_dir.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        if verbose:
            print(f"[inductor_swiglu build] {msg}", file=sys.stderr, flush=True)

    todo, objects = [], []
    for unit in units:
        obj = OBJ_DIR / f"{unit.stem}-{_key(unit.src, flags_of(unit), nvcc_version)}.o"
        objects.append(obj)
        if not obj.exists():
            todo.append((unit, obj))
    # Longest first, so the last unit to start is a short one.
    todo.sort(key=lambda t: -t[0].kernels(selection))
    memory = available_gb()
    budget = memory * 0.9 if memory is not None and not jobs else float("inf")
    estimate = sum(unit_seconds(u.kernels(selection), u.src.name) for u, _ in todo if u.kernels(selection))
    wall = max([unit_seconds(u.kernels(selection), u.src.name) for u, _ in todo if u.kernels(selection)], default=0.0)
    rows = ", ".join(f"{impl} {len(r)}" for impl, r in selection.rows.items())
    why = f"{selection.why}; " if selection.why else ""
    log(f"kernels: {selection.kernels} ({why}{rows} configurations; {', '.join(selection.dtypes)}); "
        f"{len(units)} units, {len(todo)} to compile on {cores} core(s)"
        + (f" within {memory:.0f} GB" if memory is not None else "")
        + (f", about {max(wall, estimate / cores) / 60:.1f} min" if estimate else ""))

    def compile_one(unit: Unit, obj: Path) -> tuple[Unit, float]:
        src = unit.src
        t0 = time.time()
        tmp = obj.with_suffix(".o.tmp")
        cmd = [nvcc, *flags_of(unit), "-c", str(src), "-o", str(tmp)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise failure(f"compiling {unit.name}", cmd, res)
        lmem = local_memory_functions(res.stderr)
        if lmem and src.name not in LOCAL_MEMORY_ALLOWED:
            raise BuildError(f"{src.name}: {len(lmem)} kernel(s) use local memory (a register array indexed at run "
                             f"time, or spills), e.g. {lmem[0][:200]}; see kernels/build.py LOCAL_MEMORY_ALLOWED")
        if res.stderr.strip() and src.name not in LOCAL_MEMORY_ALLOWED:
            log(f"{src.name}: {res.stderr.strip()}")   # ptxas spill warnings and the like: they matter for speed
        tmp.replace(obj)
        return unit, time.time() - t0

    t_start = time.time()
    # Units start while a core is free and their memory estimate fits beside the running ones'
    # (a unit that alone exceeds the budget still runs, alone).
    pending = list(todo)
    running: dict[concurrent.futures.Future, float] = {}
    finished = 0
    with _Progress(log) as progress, concurrent.futures.ThreadPoolExecutor(max_workers=cores) as pool:
        while pending or running:
            while pending and len(running) < cores:
                unit, obj = pending[0]
                need = peak_gb(unit.kernels(selection))
                if running and sum(running.values()) + need > budget:
                    break
                pending.pop(0)
                with progress.lock:
                    progress.running[unit.name] = time.time()
                running[pool.submit(compile_one, unit, obj)] = need
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in done:
                running.pop(fut)
                unit, dt = fut.result()
                finished += 1
                with progress.lock:
                    progress.running.pop(unit.name, None)
                log(f"[{finished}/{len(todo)}] {unit.name} compiled in {dt:.0f} s ({time.time() - t_start:.0f} s elapsed)")
    lib = out_dir / LIB_NAME
    tmp = lib.with_suffix(".so.tmp")
    cmd = [nvcc, "-shared", "-cudart=static", *SM90A, *[str(o) for o in objects], "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise failure("linking", cmd, res)
    tmp.replace(lib)
    log(f"wrote {lib} ({lib.stat().st_size / 1e6:.1f} MB) in {time.time() - t_start:.0f} s")
    return lib


def build_op(out_dir: Path | None = None, verbose: bool = True) -> Path:
    """Compile csrc/op/ against torch's Stable ABI and link it to the kernel library in out_dir."""
    out_dir = Path(out_dir) if out_dir else PACKAGE / "_lib"
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
    generate_vocabulary()
    flags = CXX_FLAGS + [f"-I{CSRC}", f"-I{GEN_DIR}", f"-I{torch_dir / 'include'}"]
    version = (torch_dir / "include" / "torch" / "headeronly" / "version.h")
    h = hashlib.sha256()
    for part in (" ".join(flags), subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout):
        h.update(part.encode())
    for f in [src, *headers(), version]:
        if f.exists():
            h.update(f.read_bytes())
    OBJ_DIR.mkdir(parents=True, exist_ok=True)
    obj = OBJ_DIR / f"{src.stem}-{h.hexdigest()[:16]}.o"
    t0 = time.time()
    if not obj.exists():
        tmp = obj.with_suffix(".o.tmp")
        cmd = [cxx, *flags, "-c", str(src), "-o", str(tmp)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise failure(f"compiling {src.name}", cmd, res)
        tmp.replace(obj)
    lib = out_dir / OP_LIB_NAME
    tmp = lib.with_suffix(".so.tmp")
    # DT_NEEDED on the kernel library (found next to this one through $ORIGIN) and on
    # libtorch_cpu (already loaded by `import torch`, matched by its soname at load time).
    cmd = [cxx, "-shared", str(obj), f"-L{out_dir}", "-l:" + LIB_NAME, f"-L{torch_dir / 'lib'}", "-ltorch_cpu",
           "-Wl,-rpath,$ORIGIN", "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise failure(f"linking {OP_LIB_NAME}", cmd, res)
    tmp.replace(lib)
    if verbose:
        print(f"[inductor_swiglu build] wrote {lib} against torch headers in {torch_dir} "
              f"(Stable ABI, target 2.11) in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="directory for the .so (default: the package's _lib/)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="parallel nvcc processes (default: one per core, as many as the available memory holds)")
    ap.add_argument("--kernels", default=None,
                    help="shipped (default, or $INDUCTOR_SWIGLU_KERNELS): what the shipped dispatch tables use; "
                         "device: what the tables serving this machine's GPUs use (an install on a GPU machine); "
                         "h100 (a table's name, or several joined by +): what device builds on a machine with "
                         "those GPUs, without them; all: every row; shipped+KERNEL: the shipped rows and every "
                         "row of KERNEL (e.g. shipped+scaled_gemm)")
    args = ap.parse_args(argv)
    try:
        build(args.out, args.jobs, kernels=args.kernels)
        build_op(args.out)
    except BuildError as e:
        print(f"[inductor_swiglu build] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
