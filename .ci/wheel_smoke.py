"""The installed wheel, from outside any source tree: python wheel_smoke.py kernels|pure

Imports the package from site-packages and every module in it, checks that the kernel library and
the C++ op load from the installed package (a wheel built with them) or are absent (a pure wheel),
and compiles a small gated MLP on the CPU with backend="inductor_swiglu": one rewrite, the eager
result.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import sysconfig
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import inductor_swiglu


def installed_package() -> Path:
    pkg = Path(inductor_swiglu.__file__).resolve().parent
    sites = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    assert pkg.parent in sites, f"inductor_swiglu was imported from {pkg}, not from site-packages {sorted(map(str, sites))}"
    return pkg


def import_every_module() -> list[str]:
    """Every module of the installed package; a missing one of the package's own fails, a missing
    optional dependency (transformers, triton, ...) is listed."""
    optional = []
    for mod in pkgutil.walk_packages(inductor_swiglu.__path__, "inductor_swiglu."):
        try:
            importlib.import_module(mod.name)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] == "inductor_swiglu":
                raise
            optional.append(f"{mod.name} (needs {e.name})")
    for name in ("inductor_swiglu.patterns.swiglu", "inductor_swiglu.integrations.transformers_fp8"):
        assert name in sys.modules, f"{name} is not in the wheel"
    return optional


def check_libraries(pkg: Path, expect: str) -> None:
    status = inductor_swiglu.kernel_status()
    print(json.dumps({k: v for k, v in status.items() if k != "configs"}, indent=1))
    if expect == "pure":
        assert not status["available"] and not status["native"]["available"], status
        return
    assert status["available"], status["reason"]
    assert status["native"]["available"], status["native"]["reason"]
    for path in (status["path"], status["native"]["path"]):
        assert Path(path).resolve().is_relative_to(pkg), f"{path} is not the installed package's ({pkg})"


class GatedMLP(nn.Module):
    def __init__(self, hidden: int = 64, ffn: int = 96):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def smoke() -> None:
    torch.manual_seed(0)
    model, x = GatedMLP(), torch.randn(4, 64)
    inductor_swiglu.reset_counters()
    # caches off: on a hit of an earlier run's FX graph the pass does not run, and rewrites nothing
    with torch.no_grad(), torch._inductor.config.patch(force_disable_caches=True):
        out = torch.compile(model, backend="inductor_swiglu")(x)
        ref = model(x)
    rewrites = inductor_swiglu.counters()["swiglu_rewrites"]
    assert rewrites == 1, f"{rewrites} rewrites of the gated MLP, expected 1"
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


def main() -> int:
    (expect,) = sys.argv[1:] or ["pure"]
    assert expect in ("kernels", "pure"), expect
    pkg = installed_package()
    optional = import_every_module()
    check_libraries(pkg, expect)
    smoke()
    print(f"wheel smoke test passed: inductor_swiglu {inductor_swiglu.__version__} from {pkg}, torch {torch.__version__}"
          + (f"; not imported for want of optional dependencies: {', '.join(optional)}" if optional else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
