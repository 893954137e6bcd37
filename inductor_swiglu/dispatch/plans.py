"""The plan for one call of any form (``Plan``, with one list of ``REASONS``): which implementation
and configuration, what to try if it declines, and whether a CUDA graph should capture the Triton
kernel instead.  This module answers for the dense op; ``forms`` for the Triton-kernel forms (FP8,
routed experts) with the same type.

``plan()`` answers per (device, dtype, activation, M, N, K); ``native_rows()`` hands the same
answers to the C++ op as rows it looks up per call (nearest measured (K, N), then the M bucket)
without any rule of its own.  The rules, in order:

1. ``INDUCTOR_SWIGLU_FORCE_KERNEL`` (``forced``) wins: that implementation on every call.
2. A GPU other than sm_90: the unfused path eagerly, the fused Triton kernel inside CUDA graphs.
3. The device's table (``devices``): the keys it serves and the entry for the shape; a key it
   does not serve, or an element type this build has no kernels for, runs unfused.
4. A kernel that declines the problem (a layout its TMA cannot describe, say) falls back to the
   other kernels (the decode GEMM only up to 32 tokens: it tiles tokens 8 at a time), then to
   the unfused path.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernels import library as kl
from ..kernels.triton import swiglu as triton_swiglu
from ..kernels.triton import swiglu_fp8 as tss
from ..kernels.triton import swiglu_grouped as tgs
from ..kernels.vocabulary import ACTIVATION_IDS, DTYPE_IDS
from .devices import DeviceKind
from .forced import forced_kernel
from .table import M_BUCKETS, Entry, Key, lookup, table_for

# Why an implementation ran.  The C++ op counts calls by (implementation, reason index): its own
# input checks use the first part, in the order of `enum CheckReason` in csrc/op/swiglu_forward.cpp;
# plan rows carry indices into the rest.
CHECK_REASONS: tuple[str, ...] = (
    "empty input: nothing to compute",
    "biases are not fused by the kernels",
    "the weights or x are not laid out as the kernels read them (row-major [N, K] rows, unit stride "
    "along K, 16-byte aligned, no repeated or overlapping rows), or K, N are not multiples of 8",
    "the planned kernel declined the problem",
    "first eager call at this shape: compiles the Triton kernel before a CUDA graph captures it",
    "no plan could be set for this device (the Python package did not answer): unfused",
)
PLAN_REASONS: tuple[str, ...] = (
    "measured fastest at this shape (dispatch table)",
    "measured faster than the fused kernels at this shape (dispatch table)",
    "forced by INDUCTOR_SWIGLU_FORCE_KERNEL",
    "GPU is not Hopper (sm_90): the CUTLASS kernels need it; the Triton kernel serves CUDA graphs",
    "captured in a CUDA graph: measured faster than the CUTLASS kernels at this shape (dispatch table)",
    "captured in a CUDA graph on a GPU other than Hopper (sm_90): the fused path there",
    "no dispatch table serves this dtype and activation on this GPU",
    "this build has no kernels for this dtype (the shipped tables do not serve it; "
    "INDUCTOR_SWIGLU_KERNELS=all builds them)",
    "a forced CUTLASS kernel cannot run on a GPU other than Hopper (sm_90)",
    "the kernel library is not loaded (inductor_swiglu.kernel_status() says why)",
)
# The Triton-kernel forms' own wording (the FP8 forms, routed experts): after the dense op's, so the
# indices the C++ op knows stay where they are.
FORM_REASONS: tuple[str, ...] = (
    "the unfused path measured faster at this shape (dispatch table)",
    "forced to a CUTLASS kernel by INDUCTOR_SWIGLU_FORCE_KERNEL; none takes this form, so unfused",
    "forced to a CUTLASS kernel by INDUCTOR_SWIGLU_FORCE_KERNEL; none takes routed experts, so unfused",
    "no dispatch table serves FP8 on this GPU",
    "no dispatch table serves routed experts of this dtype on this GPU",
)
REASONS = CHECK_REASONS + PLAN_REASONS + FORM_REASONS
(MEASURED, MEASURED_UNFUSED, FORCED, NOT_HOPPER, TRITON_MEASURED, TRITON_NOT_HOPPER, NO_TABLE, NOT_BUILT,
 FORCED_NOT_HOPPER, NO_LIBRARY) = range(len(CHECK_REASONS), len(CHECK_REASONS) + len(PLAN_REASONS))
(UNFUSED_MEASURED, FORCED_CUTLASS_FP8, FORCED_CUTLASS_GROUPED, NO_TABLE_FP8, NO_TABLE_GROUPED) = range(
    len(CHECK_REASONS) + len(PLAN_REASONS), len(REASONS))
CHECK_DECLINED = CHECK_REASONS.index("the planned kernel declined the problem")

# A plan row's key is dtype id * 4 + activation id (DTYPE_IDS, ACTIVATION_IDS: the C ABI's ids).
# The implementations of the Triton-kernel forms, as the tables name them (table.IMPLS).
SCALED_TRITON = "scaled_triton"      # the FP8 forms' fused Triton kernel
SCALED_CUTLASS = "scaled_gemm"       # the FP8 forms' scaled CUTLASS GEMM
GROUPED_TRITON = "grouped_triton"    # the routed experts' fused grouped Triton kernel
TRITON_CONFIGS = {SCALED_TRITON: tss.BY_NAME, GROUPED_TRITON: tgs.BY_NAME}
# where no decode kernel is tried as a fallback: it tiles tokens 8 at a time
DECODE_MAX_M = 32


@dataclass(frozen=True)
class Plan:
    """What one call of any form runs, and why.  Names, as the tables spell them; the C++ op's ids
    (dense form) are the ``*_id`` properties."""

    impl: str                      # kernels.library's name (dense) or the table's (scaled_triton, scaled_gemm,
                                   # grouped_triton), or "unfused"
    config: str                    # its configuration name; "" = its default (or none: unfused)
    reason: int                    # index into REASONS
    detail: str = ""               # what the lookup found, in words (diagnostics)
    triton: str = ""               # dense: Triton configuration for calls captured into a CUDA graph; "" none
    triton_reason: int = -1
    fallbacks: tuple[str, ...] = ()   # dense: kernels to try, in order, when `impl` declines
    stock_us: float | None = None  # stock torch.compile's GPU time at the measured point, where recorded

    @property
    def fused(self) -> bool:
        return self.impl != kl.NAMES[kl.UNFUSED]

    @property
    def cutlass(self) -> bool:
        """The FP8 forms' scaled CUTLASS GEMM."""
        return self.impl == SCALED_CUTLASS

    @property
    def kernel_config(self):
        """The Triton kernel's configuration of the FP8 or routed-expert forms (None for the others)."""
        return TRITON_CONFIGS.get(self.impl, {}).get(self.config)

    @property
    def weight_only_config(self):
        """The Triton kernel's configuration for a weight-only FP8 call (None for the unfused path)."""
        return tss.WEIGHT_ONLY_BY_NAME.get(self.config) if self.impl == SCALED_TRITON else None

    @property
    def impl_id(self) -> int:
        return kl.IDS[self.impl]

    @property
    def config_id(self) -> int:
        """The configuration's index in the library's (or the dense Triton kernel's) list; -1 = the default."""
        if self.impl_id == kl.TRITON:
            return triton_index(self.config)
        return config_index(self.impl_id, self.config)

    @property
    def triton_id(self) -> int:
        return triton_index(self.triton)

    @property
    def fallback_ids(self) -> tuple[int, ...]:
        return tuple(kl.IDS[f] for f in self.fallbacks)

    def describe(self) -> str:
        what = f"{self.impl} {self.config}".strip()
        text = f"{what} ({REASONS[self.reason]}{'; ' + self.detail if self.detail else ''})"
        if self.triton:
            text += f"; in CUDA graphs triton {self.triton}"
        return text


def triton_default(M: int) -> int:
    """The Triton configuration where no measurement chose one (other GPUs, forced)."""
    m16, m64, large = triton_swiglu.default_indices()
    return m16 if M <= 16 else m64 if M <= 64 else large


def triton_default_name(M: int) -> str:
    return triton_swiglu.CONFIGS[triton_default(M)].name


def fallbacks(impl: int, m_hi: int) -> tuple[str, ...]:
    """The kernels to try after `impl` declines, for a plan that serves M up to m_hi."""
    if impl not in kl.KERNELS:
        return ()
    order = (kl.INTERLEAVED_GEMM, kl.DUAL_GEMM, kl.DECODE_GEMM)
    return tuple(kl.NAMES[k] for k in order if k != impl and (k != kl.DECODE_GEMM or m_hi <= DECODE_MAX_M))


def config_index(impl: int, name: str) -> int:
    """The index of a configuration name in this library (-1 where the library lacks it)."""
    lib = kl.get_library()
    if lib is None or not name:
        return -1
    names = lib.configs(impl)
    return names.index(name) if name in names else -1


def triton_index(name: str) -> int:
    names = [c.name for c in triton_swiglu.CONFIGS]
    return names.index(name) if name in names else -1


UNFUSED = kl.NAMES[kl.UNFUSED]


def _entry_plan(e: Entry, source: Key, key: Key) -> Plan:
    impl = kl.IDS[e.impl]
    where = f"K={e.K} N={e.N} M in [{e.m_lo}, {e.m_hi}]" + (f", rows of {source.text}" if source != key else "")
    tri = e.triton if triton_index(e.triton) >= 0 else ""
    tri_reason = TRITON_MEASURED if tri else -1
    if impl == kl.UNFUSED:
        return Plan(UNFUSED, "", MEASURED_UNFUSED, where, tri, tri_reason)
    found = config_index(impl, e.config) >= 0
    detail = where if found else f"{where}; {e.config} is not in this library, its default runs"
    return Plan(e.impl, e.config if found else "", MEASURED, detail, tri, tri_reason, fallbacks(impl, e.m_hi))


def _forced_plan(name: str, hopper: bool, M: int) -> Plan:
    impl = kl.IDS[name]
    if impl == kl.TRITON:
        return Plan(name, triton_default_name(M), FORCED)
    if impl == kl.UNFUSED:
        return Plan(UNFUSED, "", FORCED)
    if not hopper:
        return Plan(UNFUSED, "", FORCED_NOT_HOPPER)
    return Plan(name, "", FORCED, fallbacks=fallbacks(impl, 1 << 62))


def _unserved(device: DeviceKind, key: Key, M: int) -> Plan | None:
    """The plan where no table entry applies; None where one does."""
    if not device.hopper:
        return Plan(UNFUSED, "", NOT_HOPPER, triton=triton_default_name(M), triton_reason=TRITON_NOT_HOPPER)
    table = table_for(device.table)
    if table is None or table.source_of(key) is None:
        return Plan(UNFUSED, "", NO_TABLE, f"{key.text} on {device.name}")
    lib = kl.get_library()
    if lib is None:
        return Plan(UNFUSED, "", NO_LIBRARY, kl.unavailable_reason())
    if key.dtype not in lib.built_dtypes():
        return Plan(UNFUSED, "", NOT_BUILT, key.dtype)
    return None


def plan(device: DeviceKind, dtype: str, activation: str, M: int, N: int, K: int) -> Plan:
    """What a call of this size runs (see the module docstring for the rules)."""
    name = forced_kernel()
    if name is not None:
        return _forced_plan(name, device.hopper, M)
    key = Key(dtype, activation)
    fixed = _unserved(device, key, M)
    if fixed is not None:
        return fixed
    table = table_for(device.table)
    e = lookup(table.rows_for(key), M, N, K)
    return _entry_plan(e, table.source_of(key), key)


def native_rows(device: DeviceKind) -> list[tuple[int, ...]]:
    """Every plan of `device` as the C++ op's rows: (key, K, N, m_lo, m_hi, impl, config, reason,
    Triton config, its reason, fallback 1, fallback 2), sorted by (key, K, N, m_lo), which is also
    the order the C++ lookup breaks ties in.  Every key the op takes gets rows, so the C++ op has
    no default of its own."""
    rows = []
    name = forced_kernel()
    table = table_for(device.table)
    for dtype, dt_id in DTYPE_IDS.items():
        for act, act_id in ACTIVATION_IDS.items():
            key_id = dt_id * 4 + act_id
            key = Key(dtype, act)
            entries: list[tuple[int, int, int, int, Plan]] = []
            if name is None and _unserved(device, key, 1) is None:
                entries = [(e.K, e.N, e.m_lo, e.m_hi, _entry_plan(e, table.source_of(key), key))
                           for e in table.rows_for(key)]
            else:
                # one row per M bucket over every shape: the forced or fixed plan depends on M only
                entries = [(1, 1, lo, hi, plan(device, dtype, act, rep, 1, 1)) for lo, hi, rep in M_BUCKETS]
            for K, N, lo, hi, p in entries:
                fb = (*p.fallback_ids, -1, -1)[:2]
                rows.append((key_id, K, N, lo, hi, p.impl_id, p.config_id, p.reason, p.triton_id, p.triton_reason,
                             *fb))
    return sorted(rows)
