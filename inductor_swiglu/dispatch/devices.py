"""Which device kind a GPU is, and which dispatch table serves it.

A table is measured on one kind of GPU (``tables/<kind>.json``).  Another Hopper part has the
same SM90 cores but other memory bandwidth, L2 and power limits, so the fastest tile at a shape
can differ near a tie: a part uses its own table where one ships, and otherwise the nearest
part's (``NEAREST_KINDS``), which the log and ``python -m inductor_swiglu status`` say once.  A
table measured for some key families only (a device's sweeps run one family at a time) borrows
the others from the nearest part's table, and says which.  GPUs other than sm_90 run no CUTLASS
kernel; there the fused Triton kernel serves calls captured into CUDA graphs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .table import completed_table
from .table import shipped as shipped_tables

# Device-name fragments of each kind, most specific first (the name is torch's
# get_device_properties().name, e.g. "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA GH200 480GB").
KINDS_BY_NAME: tuple[tuple[str, str], ...] = (
    ("GH200", "gh200"), ("H200", "h200"), ("H100", "h100"), ("H800", "h800"), ("H20", "h20"),
)
# The kinds whose tables a Hopper part without its own uses, nearest first: the H800 is an H100
# with less NVLink; the GH200 has the H200's HBM3e; the H20's HBM3 and an unknown part's are
# nearer the H100's.
NEAREST_KINDS: dict[str, tuple[str, ...]] = {
    "h800": ("h100", "h200"), "h20": ("h100", "h200"), "gh200": ("h200", "h100"), "sm_90": ("h100", "h200"),
    "h100": ("h200",), "h200": ("h100",),
}


@dataclass(frozen=True)
class DeviceKind:
    name: str            # "h200", "h100", ..., "sm_90" for an unknown Hopper part, "sm_89" for others
    hopper: bool         # whether the sm_90a kernels run on it
    table: str | None    # the device kind whose table serves it; None where no table applies
    note: str = ""       # which table serves it where that was not measured on it (said once in the log and in status)


def kind_of(name: str, capability: tuple[int, int], shipped: frozenset[str] | None = None) -> DeviceKind:
    """The kind of a GPU from its name and compute capability, and the table that serves it."""
    major, minor = capability
    if (major, minor) != (9, 0):
        return DeviceKind(f"sm_{major}{minor}", False, None)
    shipped = frozenset(shipped_tables()) if shipped is None else shipped
    kind = next((k for frag, k in KINDS_BY_NAME if frag in name), "sm_90")
    if kind in shipped:
        _, borrowed, lender = completed_table(kind)
        note = ""
        if borrowed:
            families = sorted({k.text.rsplit("/", 1)[0] for k in borrowed})
            note = (f"the {kind.upper()} table has no rows measured on {name} for {', '.join(families)}: "
                    f"those problems use the {lender.upper()} table's rows")
        return DeviceKind(kind, True, kind, note)
    nearest = next((k for k in NEAREST_KINDS.get(kind, ()) if k in shipped), None)
    if nearest is None:
        return DeviceKind(kind, True, None, f"no dispatch table ships for {name}: the op runs unfused")
    return DeviceKind(kind, True, nearest,
                      f"no dispatch table was measured on {name}; it uses the {nearest.upper()} table, the "
                      "nearest part's (same SM90 cores, other memory bandwidth and power limits: choices near a "
                      "tie may differ; benchmarks/sweep_dispatch.py --install measures its own)")


@functools.cache
def device_kind(index: int) -> DeviceKind:
    """The kind of CUDA device `index` (torch is imported here: the table code stays torch-free)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    return kind_of(props.name, (props.major, props.minor))
