"""GeGLU on a Hopper GPU: the decode GEMM, the interleaved GEMM, the dual GEMM, the unfused path and
the Triton kernel compute act(x Wg^T) * (x Wu^T) with the activation asked for, against fp64, with
the same metric as SiLU (0% of resolved elements over 1% relative error); the dispatched op runs
what the plan says (bf16: a fused kernel; fp16 and fp32, which no dispatch table serves: the
unfused path); a compiled GeGLU MLP runs the fused op under CUDA graphs.  Outputs are poisoned
with NaN, inputs fresh random data."""

import pytest
import torch
import torch.nn.functional as F
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.dispatch import plans
from inductor_swiglu.kernels import configs
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.kernels.configs import DecodeWgmmaConfig
from inductor_swiglu.kernels.triton import swiglu as triton_swiglu
from inductor_swiglu.models.shapes import QWEN25_MLP
from inductor_swiglu.ops import cuda_impl, impl_stats
from inductor_swiglu.testing.inputs import swiglu_inputs
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]

ACTIVATIONS = ["gelu_tanh", "gelu"]
SHAPES = {m: QWEN25_MLP[m] for m in ("q0.5B", "q7B", "q14B")}


def _check(out, x, wg, wu, activation, fused=True):
    """fused: rounded once from fp32 (0% over 1%); else the unfused path, which rounds gate and up to
    the input dtype first as stock Inductor does (judged norm-wise, as the SiLU tests judge it)."""
    torch.cuda.synchronize()
    s = error_stats(out, reference_fp64(x, wg, wu, with_noise=True, activation=activation))
    if fused or out.dtype == torch.float32:
        assert s["nonfinite"] == 0 and s["frac_over_1pct_resolved"] == 0.0 and s["normwise"] < 4e-3, s
    else:
        assert s["nonfinite"] == 0 and s["normwise"] < 1e-2, s
    # and not SiLU: the two differ by far more than the rounding
    silu = error_stats(out, reference_fp64(x, wg, wu))
    assert silu["normwise"] > 1e-2, silu


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("model", list(SHAPES))
@pytest.mark.parametrize("kernel,ms", [(kl.DECODE_GEMM, (1, 3, 7, 16)), (kl.INTERLEAVED_GEMM, (1, 16, 77, 128)),
                                       (kl.DUAL_GEMM, (128, 1000, 2048))],
                         ids=["decode_gemm", "interleaved_gemm", "dual_gemm"])
def test_fused_kernels(kernel, ms, model, activation):
    K, N = SHAPES[model]
    for M in ms:
        x, wg, wu = swiglu_inputs(M, K, N, seed=M + K)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        cuda_impl.run_kernel(kernel, x, wg, wu, out=out, activation=activation)
        _check(out, x, wg, wu, activation)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("model", list(SHAPES))
def test_decode_wgmma_rows(model, activation):
    """The decode GEMM's CUTLASS rows read the activation at run time: every row this library
    holds (a configuration index is a position in lib.configs), every activation."""
    K, N = SHAPES[model]
    by_name = {c.name: c for c in configs.DECODE_GEMM}
    rows = [i for i, name in enumerate(kl.get_library().configs(kl.DECODE_GEMM))
            if isinstance(by_name[name], DecodeWgmmaConfig)]
    if not rows:
        pytest.skip("this library holds no CUTLASS (wgmma) row of the decode GEMM")
    for config in rows:
        for M in (1, 16):
            x, wg, wu = swiglu_inputs(M, K, N, seed=M + K + config)
            out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            cuda_impl.run_kernel(kl.DECODE_GEMM, x, wg, wu, config=config, out=out, activation=activation)
            _check(out, x, wg, wu, activation)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_native_op_every_m_and_the_unfused_path(activation, dtype):
    K, N = QWEN25_MLP["q1.5B"]
    op = torch.ops.inductor_swiglu.swiglu_forward.default
    # INDUCTOR_SWIGLU_FORCE_KERNEL is read once at import: a test forces through force_kernel
    for force in (None, "unfused"):
        with dispatch.force_kernel(force):
            for M in (1, 7, 16, 77, 128, 1000):
                x, wg, wu = swiglu_inputs(M, K, N, dtype, seed=M)
                torch.full((M, N), float("nan"), device="cuda", dtype=dtype)   # poison the block the op gets next
                inductor_swiglu.reset_op_stats()
                out = op(x, wg, wu, activation=activation)
                stats = inductor_swiglu.op_stats()
                # fused: a CUTLASS kernel or the Triton kernel (the first eager call at a shape the table
                # gives Triton for CUDA graphs runs Triton, to compile it).  Only bf16 is served by a
                # dispatch table: fp16 (a default build has no fp16 kernels) and fp32 run unfused, said
                # (fp16 used to run the kernels: the shipped tables now decide per dtype).
                fused = stats["fused_calls"] == 1
                assert fused == (force is None and dtype == torch.bfloat16), stats
                if not fused:
                    why = plans.REASONS[plans.FORCED if force else plans.NO_TABLE]
                    assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {why: 1}}, stats
                _check(out, x, wg, wu, activation, fused=fused)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_triton_kernel_forced(activation):
    K, N = QWEN25_MLP["q3B"]
    for M in (1, 16, 77):
        x, wg, wu = swiglu_inputs(M, K, N, seed=M)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        triton_swiglu.swiglu_triton(x, wg, wu, out=out, activation=activation)
        _check(out, x, wg, wu, activation)


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_compiled_geglu_mlp_under_cuda_graphs(approximate):
    class Geglu(GatedMLP):
        def forward(self, x):
            return self.down_proj(F.gelu(self.gate_proj(x), approximate=approximate) * self.up_proj(x))

    model = Geglu(896, 4864).cuda().to(torch.bfloat16).eval()
    compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
    inductor_swiglu.reset_op_stats()
    with torch.no_grad():
        for step in range(4):   # new inputs every replay
            x = torch.randn(8, 896, device="cuda", dtype=torch.bfloat16)
            out = compiled(x)
            ref = model(x)
            assert torch.isfinite(out).all()
            torch.testing.assert_close(out, ref, atol=3e-2, rtol=3e-2)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == 1 and c["cudagraph_skips"] == 0, c
    assert c["op"]["fused_calls"] >= 1 and c["op"]["unfused_calls"] == 0, c["op"]   # CUTLASS or Triton
