"""Host-side cost of one eager call of the op, stage by stage (decode calls it once per layer per token)."""
import cProfile
import ctypes
import pstats
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import host_us_per_call  # noqa: E402

import inductor_swiglu  # noqa: E402,F401
from inductor_swiglu.ops import cuda_impl  # noqa: E402
from inductor_swiglu.ops import kernel_library as kl  # noqa: E402

K, N = 896, 4864
x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
wg = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
wu = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
out = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
lib = kl.get_library()
p = cuda_impl._problem(x, wg, wu, out, -1)
res = {
    "op (torch.ops.inductor_swiglu.swiglu)": host_us_per_call(lambda: torch.ops.inductor_swiglu.swiglu(x, wg, wu)),
    "cuda_impl.swiglu_cuda (no dispatcher)": host_us_per_call(lambda: cuda_impl.swiglu_cuda(x, wg, wu)),
    "ctypes isw_run kernel2 only": host_us_per_call(lambda: lib.lib.isw_run(2, ctypes.byref(p))),
    "ctypes isw_run kernel1 only": host_us_per_call(lambda: lib.lib.isw_run(1, ctypes.byref(p))),
    "ctypes isw_can_implement kernel2": host_us_per_call(lambda: lib.lib.isw_can_implement(2, ctypes.byref(p))),
    "torch.cuda.current_stream().cuda_stream": host_us_per_call(lambda: torch.cuda.current_stream(x.device).cuda_stream),
    "F.linear": host_us_per_call(lambda: F.linear(x, wg)),
    "eager silu(linear)*linear": host_us_per_call(lambda: F.silu(F.linear(x, wg)) * F.linear(x, wu)),
}
for k, v in res.items():
    print(f"{v:8.2f} us  {k}")
pr = cProfile.Profile()
pr.enable()
for _ in range(2000):
    torch.ops.inductor_swiglu.swiglu(x, wg, wu)
pr.disable()
torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(15)
