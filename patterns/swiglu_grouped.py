"""Routed experts' gated projection: search patterns and their replacement, side by side.

The forms an MoE layer's experts reach the post-grad graph in:

* ``grouped``: transformers' ``grouped_mm`` experts (its default for every MoE model that uses
  ``@use_experts_implementation``): the rows sorted by expert, one ``torch._grouped_mm`` against
  the merged ``gate_up_proj`` (``[E, 2N, K]``, passed transposed; or ``[E, K, 2N]`` where the model
  stores it so), its output chunked into the gate and up halves (``split`` in the graph; sliced,
  written by hand), then ``act(gate) * up``;
* ``grouped`` with the sentinel mask: transformers 5.x before 5.24 zero the GEMM's rows of
  routing sentinels (expert-parallel placeholders) with ``masked_fill(mask, 0)`` before the
  gating, on every call; act(0) * 0 = 0 for SiLU and GELU, so the replacement masks the op's
  output instead, the same values;
* ``grouped_pair``: separate gate and up weights, two ``torch._grouped_mm`` of the same rows and
  offsets (torchtitan's and hand-written MoE code);
* ``batched``: transformers' ``batched_mm`` experts: each routed row gathers its expert's weights
  (``gate_up_proj[expert_ids]``) and multiplies with ``bmm``, then chunk and ``act(gate) * up``.
  The replacement sorts the rows by expert on the device, runs the grouped op and puts the rows
  back, instead of copying ``[S, 2N, K]`` weights per call.

Where the code activates the second half (``up, gate = y.chunk(2, -1)``, or slices), the
replacement hands the op the merged weights' two halves as separate weights, gate first (views,
no copy); the search's halves match either way round and the pass tells which is the gate.

transformers' per-expert loop (``experts_implementation="eager"``) never reaches a graph: Dynamo
breaks the graph on its data-dependent loop and runs the experts eagerly.

Activations: SiLU, GELU (tanh) and GELU as the dense patterns spell them; either product order.
As for the dense patterns, shapes, scalars and dtypes are ignored when matching, and the pass
re-checks them (``compiler/passes/fusion/swiglu_grouped.py``): the split into two equal halves,
the 3-D weights, int32 offsets, the activation's constants.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import torch

from .swiglu import ACTIVATIONS as DENSE_ACTIVATIONS
from .swiglu import OP_ACTIVATION, PRODUCTS

# The spellings transformers' ACT2FN and hand-written MoE code use (the dense file has more).
ACTIVATIONS: dict[str, Callable] = {k: DENSE_ACTIVATIONS[k] for k in ("silu", "gelu_tanh", "gelu")}

# --------------------------------------------------------------------------- #
# The replacements.                                                            #
# --------------------------------------------------------------------------- #


def merged_weights(w_kn, gate_second: bool = False) -> tuple:
    """The op's (w, w_up) for merged ``[E, K, 2N]`` weights: the merged tensor where its first half
    is the gate (the op's reading), else its two halves as views (no copy), the gate first."""
    if not gate_second:
        return w_kn, None
    n = w_kn.shape[-1] // 2
    return w_kn[..., n:], w_kn[..., :n]


def grouped_replacement(activation: str, gate_second: bool = False) -> Callable:
    def replacement(x, w, offs):
        return torch.ops.inductor_swiglu.swiglu_grouped(x, *merged_weights(w, gate_second), offs, activation)

    return replacement


def grouped_masked_replacement(activation: str, gate_second: bool = False) -> Callable:
    def replacement(x, w, offs, mask):
        return torch.ops.inductor_swiglu.swiglu_grouped(
            x, *merged_weights(w, gate_second), offs, activation).masked_fill(mask, 0.0)

    return replacement


def grouped_pair_replacement(activation: str) -> Callable:
    def replacement(x, w_gate, w_up, offs):
        return torch.ops.inductor_swiglu.swiglu_grouped(x, w_gate, w_up, offs, activation)

    return replacement


def batched_replacement(activation: str, weights_in_out: bool, gate_second: bool = False) -> Callable:
    def replacement(x, w, expert_ids):
        # w[expert_ids] reads the ids as Python indices: int32 as well as int64, and -1 names the
        # last expert.  Ids past either end stay out of range, and scatter_add rejects them as the
        # gather does.
        E = w.shape[0]
        ids = expert_ids.to(torch.int64)
        ids = torch.where(ids < 0, ids + E, ids)
        # Sort the routed rows by expert (stable: rows of one expert keep their order), count them
        # per expert for the offsets, run the grouped op, and put each row back where it was.
        order = torch.argsort(ids, stable=True)
        counts = torch.zeros(E, dtype=torch.int64, device=x.device).scatter_add(0, ids, torch.ones_like(ids))
        offs = torch.cumsum(counts, 0).to(torch.int32)
        w_kn = w if weights_in_out else w.transpose(-2, -1)
        rows = torch.ops.inductor_swiglu.swiglu_grouped(x[order], *merged_weights(w_kn, gate_second), offs,
                                                        activation)
        return torch.empty_like(rows).index_copy(0, order, rows)

    return replacement


# --------------------------------------------------------------------------- #
# The search space.                                                            #
# --------------------------------------------------------------------------- #


def _halves_chunk(y):
    return y.chunk(2, dim=-1)


def _halves_slice(y):
    n = y.shape[-1] // 2
    return y[..., :n], y[..., n:]


HALVES: dict[str, Callable] = {"chunk": _halves_chunk, "slice": _halves_slice}


@dataclass(frozen=True)
class GroupedPattern:
    name: str
    form: str                    # "grouped", "grouped_pair" or "batched"
    search: Callable
    replacement: Callable
    activation: str              # the spelling (a key of ACTIVATIONS)
    product: str
    halves: str = ""             # how gate and up are cut from a merged output ("" for grouped_pair)
    weights_in_out: bool = False  # batched: weights stored [E, K, 2N] (bmm(x, w)) instead of [E, 2N, K]
    masked: bool = False         # grouped: the GEMM's output passes masked_fill(mask, 0) first
    # The replacement where the code activates the merged output's second half (slices match
    # either way round; the pass tells which half the activation reads).  None for grouped_pair.
    gate_second_replacement: Callable | None = None

    @property
    def op_activation(self) -> str:
        return OP_ACTIVATION[self.activation]

    def example_inputs(self, device: str = "cpu") -> list[torch.Tensor]:
        # Small, distinct sizes so the tracer cannot confuse them; bf16 (_grouped_mm's dtype).
        S, K, N, E = 6, 32, 24, 4
        x = torch.empty((S, K), dtype=torch.bfloat16, device=device)
        if self.form == "grouped_pair":
            ws = [torch.empty((E, K, N), dtype=torch.bfloat16, device=device) for _ in range(2)]
            return [x, *ws, torch.empty((E,), dtype=torch.int32, device=device)]
        if self.form == "grouped":
            mask = [torch.empty((S, 1), dtype=torch.bool, device=device)] if self.masked else []
            return [x, torch.empty((E, K, 2 * N), dtype=torch.bfloat16, device=device),
                    torch.empty((E,), dtype=torch.int32, device=device), *mask]
        shape = (E, K, 2 * N) if self.weights_in_out else (E, 2 * N, K)
        return [x, torch.empty(shape, dtype=torch.bfloat16, device=device),
                torch.empty((S,), dtype=torch.int64, device=device)]


def _grouped_search(act, product, halves):
    def search(x, w, offs):
        gate, up = halves(torch._grouped_mm(x, w, offs=offs))
        return product(act(gate), up)

    return search


def _grouped_masked_search(act, product, halves):
    def search(x, w, offs, mask):
        gate, up = halves(torch._grouped_mm(x, w, offs=offs).masked_fill(mask, 0.0))
        return product(act(gate), up)

    return search


def _grouped_pair_search(act, product):
    def search(x, w_gate, w_up, offs):
        return product(act(torch._grouped_mm(x, w_gate, offs=offs)), torch._grouped_mm(x, w_up, offs=offs))

    return search


def _batched_search(act, product, halves, weights_in_out: bool):
    # transformers' _batched_linear: bmm(w[ids], x[..., None]) for [E, 2N, K] weights,
    # bmm(x[:, None], w[ids]) for [E, K, 2N] ones.
    def search(x, w, expert_ids):
        selected = w[expert_ids]
        if weights_in_out:
            y = torch.bmm(x.unsqueeze(1), selected).squeeze(1)
        else:
            y = torch.bmm(selected, x.unsqueeze(-1)).squeeze(-1)
        gate, up = halves(y)
        return product(act(gate), up)

    return search


def all_patterns(activations=tuple(ACTIVATIONS)) -> list[GroupedPattern]:
    """Every enabled combination; the pass registers each once."""
    out = []
    for act, prod in itertools.product(ACTIVATIONS, PRODUCTS):
        if act not in activations:
            continue
        op_act = OP_ACTIVATION[act]
        for halves in HALVES:
            out.append(GroupedPattern(f"grouped_mm.{halves}.{act}.{prod}", "grouped",
                                      _grouped_search(ACTIVATIONS[act], PRODUCTS[prod], HALVES[halves]),
                                      grouped_replacement(op_act), act, prod, halves,
                                      gate_second_replacement=grouped_replacement(op_act, gate_second=True)))
            out.append(GroupedPattern(f"grouped_mm.masked.{halves}.{act}.{prod}", "grouped",
                                      _grouped_masked_search(ACTIVATIONS[act], PRODUCTS[prod], HALVES[halves]),
                                      grouped_masked_replacement(op_act), act, prod, halves, masked=True,
                                      gate_second_replacement=grouped_masked_replacement(op_act, gate_second=True)))
            for in_out in (False, True):
                out.append(GroupedPattern(
                    f"batched_mm.{'kn' if in_out else 'nk'}.{halves}.{act}.{prod}", "batched",
                    _batched_search(ACTIVATIONS[act], PRODUCTS[prod], HALVES[halves], in_out),
                    batched_replacement(op_act, in_out), act, prod, halves, weights_in_out=in_out,
                    gate_second_replacement=batched_replacement(op_act, in_out, gate_second=True)))
        out.append(GroupedPattern(f"grouped_mm_pair.{act}.{prod}", "grouped_pair",
                                  _grouped_pair_search(ACTIVATIONS[act], PRODUCTS[prod]),
                                  grouped_pair_replacement(op_act), act, prod))
    return out
