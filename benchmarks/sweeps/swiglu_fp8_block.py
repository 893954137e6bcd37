"""Form ``swiglu_fp8_block`` (FP8 checkpoints' 128 x 128 block scales): operands as an FP8
checkpoint holds them (DeepSeek-V3 / Qwen3-FP8: weights e4m3 with one scale per 128 x 128 block,
bf16 x quantized per row and 128 elements on every call), the op ``swiglu_fp8_block`` and its rows
(``float8_e4m3fn_block128``).

Candidates: the fused kernel's configurations that take block scales (x quantized inside), from
--cutlass-from tokens on the scaled CUTLASS GEMM's block-scaled rows (x quantized before it), and
the unfused path (x quantized in torch, two block-scaled cuBLAS GEMMs, one elementwise kernel);
baselines: one block-scaled ``_scaled_mm`` [M, 2N, K] on x quantized beforehand (the bare GEMM,
its gate half checked against fp64), stock torch.compile of the torch form, and, with
``--peer-fp8 DIR`` (a folder holding the ``finegrained_fp8`` package of
huggingface/kernels-community, the kernel transformers loads from the hub for these models),
``transformers``: that kernel's two linears (each quantizing x) and one elementwise kernel.
Numerics and the entry rule as ``swiglu_fp8``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from timing import Interleaved, sets_needed, time_point
from weight_read import weight_read

from inductor_swiglu.dispatch import forms, plans
from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.kernels.triton import quantize_fp8 as triton_fp8_quantize
from inductor_swiglu.kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from inductor_swiglu.models.shapes import MLP_SHAPES
from inductor_swiglu.ops import cuda_impl, cutlass_scaled_swiglu
from inductor_swiglu.ops import swiglu_fp8_block as swiglu_fp8_block_op
from inductor_swiglu.testing.numerics import error_stats, reference_fp64
from sweeps import base
from sweeps.swiglu_fp8 import DEFAULTS, chosen_entry, describe, markdown, numerics_ok

__all__ = ["DEFAULTS", "describe", "markdown"]
FP8 = torch.float8_e4m3fn
STEM = "sweep_block_fp8"
KEY = forms.fp8_key("silu", blockwise=True)


def add_arguments(ap) -> None:
    ap.add_argument("--cutlass-from", type=int, default=64, metavar="M",
                    help="time the scaled CUTLASS GEMM's configurations from this many tokens on")
    ap.add_argument("--peer-fp8", type=Path, default=None, metavar="DIR",
                    help="a folder holding kernels-community's finegrained_fp8 package")


def key(args) -> tables.Key:
    return KEY


def check(args) -> str | None:
    ok, why = triton_scaled_swiglu.available()
    return None if ok or args.op else f"the fused FP8 kernel cannot run here: {why}"


def meta(args) -> dict:
    return {"kernels": base.kernels(), "blockwise": True, "fast_accum": False}


def prepare_measure(args, meta: dict) -> dict:
    peer, meta["transformers_path"] = load_peer(args.peer_fp8)
    return {"peer": peer}


def table(rows: list[dict], meta: dict, args, ctx: dict) -> tables.Table:
    """The device's table with the block-scaled rows replaced at the points this sweep measured."""
    return base.table_with_points([chosen_entry(r, KEY) for r in rows], args.device_kind, KEY,
                                  "sweep.py --form swiglu_fp8_block", meta)


def block_sets(M: int, N: int, K: int, seed: int) -> list[tuple]:
    """(x bf16, w_gate, its block scales, w_up, its block scales, w_cat, its scales, x quantized, x's
    scales, out) sets; w_cat = [w_gate; w_up] (N is a multiple of 128 at every swept shape)."""
    assert N % 128 == 0, N
    g = torch.Generator(device="cuda").manual_seed(seed)
    n_sets = sets_needed(3 * M * K + 4 * N * K + 2 * 3 * M * N)

    def one():
        x = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
        wg, sg = swiglu_fp8_block_op.quantize_weight(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
        wu, su = swiglu_fp8_block_op.quantize_weight(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
        xq, xs = swiglu_fp8_block_op.quantize_blocks(x, swiglu_fp8_block_op.CUBLAS_ROWS)
        return (x, wg, sg, wu, su, torch.cat([wg, wu]), torch.cat([sg, su]), xq, xs,
                torch.empty(M, N, device="cuda", dtype=torch.bfloat16))

    return [one() for _ in range(n_sets)]


def block_reference(x, wg, sg, wu, su):
    """fp64 of x quantized as the op does and the dequantized weights, with the accumulation noise."""
    xq, xs = triton_fp8_quantize.quantize_blocks_reference(x)
    xd = swiglu_fp8_block_op.dequantize_x(xq, xs, torch.float64)
    return reference_fp64(xd, swiglu_fp8_block_op.dequantize_weight(wg, sg).double(),
                          swiglu_fp8_block_op.dequantize_weight(wu, su).double(), with_noise=True)


def block_unfused(x, wg, sg, wu, su, *_):
    return swiglu_fp8_block_op.unfused(x, wg, sg, wu, su, "silu")[0]


def block_fused(cfg):
    def fn(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):   # as the op runs it: quantize, then the kernel
        xq, xs = triton_fp8_quantize.quantize_blocks(x)
        return triton_scaled_swiglu.swiglu_fp8_block_triton(xq, xs, wg, sg, wu, su, "silu", torch.bfloat16, cfg, out)
    return fn


def block_cutlass(config: str):
    def fn(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):   # as the op runs it: quantize, then the kernel
        xq, xs = triton_fp8_quantize.quantize_blocks(x)
        got, why = cutlass_scaled_swiglu.run_block(xq, xs, wg, sg, wu, su, "silu", config, out)
        if got is None:
            raise RuntimeError(why)
        return got
    return fn


def block_op(x, wg, sg, wu, su, *_):
    return torch.ops.inductor_swiglu.swiglu_fp8_block(x, wg, sg, wu, su, "silu")


def block_scaled_mm_2n(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):
    return swiglu_fp8_block_op.scaled_mm_blockwise(xq, xs, w_cat, s_cat, torch.bfloat16)


def block_stock_compile():
    """Stock torch.compile of the torch form: x quantized per row and 128 elements, two block-scaled
    _scaled_mm (the scales in the layouts cuBLAS reads correctly, swiglu_fp8_block_op), the gated
    product.  Rows padded to 16 as the unfused path does (cuBLAS refuses one)."""
    torch._dynamo.reset()

    def scales_t(ws):
        nb, kb = ws.shape
        return F.pad(ws, (0, -(-kb // 4) * 4 - kb))[:, :kb].t()

    def mlp(x, wg, sg, wu, su):
        M, K = x.shape
        rows = -(-M // 16) * 16
        xb = F.pad(x.float(), (0, 0, 0, rows - M)).reshape(rows, K // 128, 128)
        xs = xb.abs().amax(dim=-1) / 448.0
        xq = (xb / xs.clamp_min(1e-12).unsqueeze(-1)).to(FP8).reshape(rows, K)
        sa = xs.t().contiguous().t()
        gate = torch._scaled_mm(xq, wg.t(), scale_a=sa, scale_b=scales_t(sg), out_dtype=torch.bfloat16)[:M]
        up = torch._scaled_mm(xq, wu.t(), scale_a=sa, scale_b=scales_t(su), out_dtype=torch.bfloat16)[:M]
        return F.silu(gate) * up

    compiled = torch.compile(mlp, backend="inductor")
    return lambda x, wg, sg, wu, su, *_: compiled(x, wg, sg, wu, su)


def transformers_path(peer):
    """What transformers runs for an FP8 checkpoint's MLP without DeepGEMM: the hub kernel's linear
    for gate and for up (each quantizing x), then act * up (one elementwise kernel, as compiled)."""
    def fn(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):
        gate = peer.matmul_2d(x, wg, sg, [128, 128], torch.bfloat16)
        up = peer.matmul_2d(x, wu, su, [128, 128], torch.bfloat16)
        cuda_impl.gated_mul(gate, up, out, "silu")
        return out
    return fn


def load_peer(folder: Path | None):
    if folder is None:
        return None, "not run (no --peer-fp8)"
    sys.path.insert(0, str(folder))
    if not (folder / "finegrained_fp8" / "_ops.py").exists():
        # The repository's source (torch-ext/) lacks the _ops module kernel-builder writes into each
        # build; for a Triton-only kernel it only names the package's torch.ops namespace.
        import types
        shim = types.ModuleType("finegrained_fp8._ops")
        shim.ops = getattr(torch.ops, "_finegrained_fp8_peer")
        shim.add_op_namespace_prefix = lambda name: f"_finegrained_fp8_peer::{name}"
        sys.modules["finegrained_fp8._ops"] = shim
    try:
        import finegrained_fp8
    except Exception as e:  # noqa: BLE001  (a peer that does not load is reported, not fatal)
        return None, f"not run: {type(e).__name__}: {e}"[:300]
    return finegrained_fp8, "kernels-community finegrained_fp8 (transformers' hub kernel) from " + str(folder)


def measure(model: str, M: int, args, ctx: dict) -> dict:
    peer = ctx["peer"]
    K, N = MLP_SHAPES[model]
    sets = block_sets(M, N, K, seed=1000 * M + N)
    first = sets[0]
    ref = block_reference(*first[:5])
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": len(sets), "candidates": {}, "references": {},
           "recipe": "block128"}
    bench = Interleaved(sets, ctx["clock"])
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    timed = [] if args.op else [(f"{plans.SCALED_TRITON}:{c.name}", block_fused(c)) for c in triton_scaled_swiglu.CONFIGS
                                if c.blockwise and c.serves(M) and c.smem_bytes() <= smem]
    if not args.op and M >= args.cutlass_from:
        timed += [(f"{plans.SCALED_CUTLASS}:{n}", block_cutlass(n)) for n in cutlass_scaled_swiglu.config_names()
                  if n in cutlass_scaled_swiglu.BLOCK_ROWS]
    timed.insert(0, ("op", block_op) if args.op else (plans.UNFUSED, block_unfused))
    refs = [("scaled_mm_2N", block_scaled_mm_2n)]
    if peer is not None:
        refs.append(("transformers", transformers_path(peer)))
    for name, fn in timed + refs:
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        args_ = (*first[:9], out)
        try:
            got = fn(*args_)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001  (a configuration the compiler or the GPU refuses)
            where = row["candidates"] if (name, fn) in timed else row["references"]
            where[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
            continue
        if name == "scaled_mm_2N":
            # a bare GEMM: its gate half against fp64 says whether cuBLAS took the block scales right
            xq, xs = triton_fp8_quantize.quantize_blocks_reference(first[0])
            xd = swiglu_fp8_block_op.dequantize_x(xq, xs, torch.float64)
            gate = xd @ swiglu_fp8_block_op.dequantize_weight(first[1], first[2]).double().T
            normwise = float((got[:M, :N].double() - gate).norm() / gate.norm())
            row["references"][name] = {"gate_normwise": normwise}
            if normwise < 1e-2:
                bench.add(name, fn)
            else:
                print(f"  WRONG NUMBERS {model} M={M} scaled_mm_2N: gate normwise {normwise:.3g}", flush=True)
            continue
        err = error_stats(got.reshape(M, N), ref)
        ok = numerics_ok(name, err)
        where = row["candidates"] if (name, fn) in timed else row["references"]
        where[name] = {"numerics": err, "numerics_ok": ok}
        if ok:
            bench.add(name, fn)
        else:
            print(f"  WRONG NUMBERS {model} M={M} {name}: {err}", flush=True)
    if not args.no_compile:
        bench.add("stock", block_stock_compile())
    if M <= 16:
        bench.add("weight_read", lambda x, wg, sg, wu, su, *_: weight_read(wg.view(torch.bfloat16), wu.view(torch.bfloat16)))
    time_point(bench, row, M >= args.sustained_from, args.burst_top,
               (plans.UNFUSED, "scaled_mm_2N", "stock", *(["transformers"] if peer is not None else [])))
    del sets, bench
    torch.cuda.empty_cache()
    return row
