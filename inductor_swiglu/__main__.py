"""Command line: python -m inductor_swiglu <command> [args]

    demo        SmolLM2-135M compiled with the backend: text, rewrites, speed vs eager
    status      what is installed: torch, the kernel library, the GPU
    build       compile the CUTLASS kernels (source checkouts; needs nvcc and nvidia-cutlass)
    diagnose    run a script or module:function and dump what torch.compile did: recompiles and
                why, guards, graphs before/after the pass, rewrites and near misses, CUDA-graph
                skips (python -m inductor_swiglu diagnose --help)
"""

from __future__ import annotations

import sys


def _status() -> int:
    import json

    import torch

    import inductor_swiglu
    from inductor_swiglu import dispatch
    from inductor_swiglu.dispatch import table as tables
    from inductor_swiglu.kernels.triton import swiglu as triton_swiglu

    kind = dispatch.device_kind(torch.cuda.current_device()) if torch.cuda.is_available() else None
    table = tables.table_for(kind.table) if kind is not None else None
    info = {
        "inductor_swiglu": inductor_swiglu.__version__,
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "capability": list(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None,
        "kernels": inductor_swiglu.kernel_status(),
        "dispatch": {
            "forced": dispatch.forced_kernel(),
            "device_kind": kind.name if kind is not None else None,
            "table": (f"{table.device} ({table.measured_on}, {table.date})" if table is not None else None),
            "serves": sorted(k.text for k in table.serves) if table is not None else [],
            "note": kind.note if kind is not None else "no CUDA device: the op runs on the CPU",
            "shipped_tables": sorted(tables.shipped()),
        },
        # where the table measured it faster, and only inside CUDA graphs (its launch costs host time)
        "triton_kernel": {"importable": triton_swiglu.importable(),
                          "available": triton_swiglu.available()[0], "reason": triton_swiglu.available()[1]},
    }
    print(json.dumps(info, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "demo":
        from .demo import main as demo_main

        return demo_main(rest)
    if cmd == "status":
        return _status()
    if cmd == "diagnose":
        from .diagnostics.cli import main as diagnose_main

        return diagnose_main(rest)
    if cmd == "build":
        from .kernels.build import main as build_main

        return build_main(rest)
    print(f"unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
