"""The Inductor post-grad pass that rewrites ``silu(x @ Wg) * (x @ Wu)`` (and its GeGLU
twin, ``gelu``) into ``torch.ops.inductor_swiglu.swiglu``, and on Hopper into its C++ form
``swiglu_forward`` (no autograd wrapper, no Python per call: post-grad graphs
need neither).

One class, one job (vLLM's pass convention): ``SwigluFusionPass`` owns a
``PatternMatcherPass`` with the patterns of ``inductor_swiglu.patterns.swiglu``
registered once, a stable ``uuid()`` for Inductor's FX graph cache, and the
bookkeeping (rewrites, near misses, errors) in ``records.RECORDS``.

Safety before speed (``can_rewrite``): the patterns are generated with shapes,
scalars and dtypes ignored, so every ignored argument is re-checked here: the
``1`` in ``1 + exp(-g)``, GELU's constants, permute dims, dtype conversions,
reshape targets, weight and bias shapes.  A pattern whose intermediates (gate, up, silu(gate))
have other users does not match at all, because the traced patterns carry exact
user counts.  Anything the check declines is recorded as a near miss with its
reason.  An internal error never breaks compilation: the graph is restored to
what it was, the error is logged and counted.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

import torch
from torch._dynamo.utils import counters
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files
from torch._inductor.pattern_matcher import Match, PatternMatcherPass, register_graph_pattern

from ..ops import dispatch, impl_stats, native
from ..ops.cuda_impl import is_hopper
from ..ops.swiglu_op import QUALNAME, SCHEMA, cpu_impl, native_serves
from ..version import __version__
from . import freezing_canon, near_miss, pattern_registry
from .fx_utils import (
    as_gelu,
    merge_equal_copies,
    source_location,
    split_merged_projections,
    statically_equal,
    unpad_projections,
    unshare_input_reshapes,
    vector_input_as_reshapes,
)
from .pass_config import PassConfig
from .records import RECORDS, GraphRecord, NearMiss, Rewrite

log = logging.getLogger("inductor_swiglu.pass")
aten = torch.ops.aten
prims = torch.ops.prims

_PACKAGE = Path(__file__).resolve().parent.parent


def uuid_sources() -> tuple[str, ...]:
    """Every file whose content can change what the pass does: all of compiler/ and patterns/,
    and the op's schema module.  Hashed by content into uuid(), so there is no list to keep."""
    dirs = (Path(__file__).resolve().parent, Path(pattern_registry.swiglu_patterns.__file__).resolve().parent)
    files = sorted(str(p) for d in dirs for p in d.glob("*.py"))
    return (*files, str(_PACKAGE / "ops" / "swiglu_op.py"))


def current_compile_id() -> str:
    cid = torch._guards.CompileContext.current_compile_id()
    return str(cid) if cid is not None else "?"


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _show_shape(shape) -> list:
    return [int(s) if isinstance(s, int) else str(s) for s in shape]


class Declined(Exception):
    """can_rewrite's way of saying no, with a reason for the near-miss report."""


def _check_gelu(match: Match, kind: str) -> None:
    """GELU's constants (0.5, 1/sqrt(2) or sqrt(2/pi) and 0.044715, the 1 in 1 + ...), which
    gen_pattern ignored, are checked on the product's activation operand."""
    out = match.output_node()
    for operand in out.args:
        found = as_gelu(operand)
        if found is not None and found[0] == kind:
            return
    raise Declined(f"the activation has GELU's form but not its constants ({kind} expected)")


def _check_ignored_args(match: Match, x_dtype: torch.dtype, activation: str) -> None:
    """Re-check the scalar/shape/dtype arguments that gen_pattern ignored."""
    if activation != "silu":
        _check_gelu(match, activation)
    for node in match.nodes:
        if node.op != "call_function":
            continue
        t = node.target
        if t is aten.add.Tensor and activation == "silu":
            # the only add in the patterns is SiLU's 1 + exp(-g)
            consts = [a for a in node.args if not isinstance(a, torch.fx.Node)]
            if consts != [1] or node.kwargs.get("alpha", 1) != 1:
                raise Declined(f"activation computes {consts[0] if consts else '?'} + exp(-g), not SiLU's 1 + exp(-g)")
        elif t is aten.permute.default:
            if list(node.args[1]) != [1, 0]:
                raise Declined(f"weight permuted with dims {node.args[1]}, expected a transpose")
        elif t is prims.convert_element_type.default:
            src = _val(node.args[0])
            dst = node.args[1]
            if src is not None and src.dtype == x_dtype and dst != torch.float32:
                raise Declined(f"the activation upcasts to {dst}, expected float32")
            if src is not None and src.dtype == torch.float32 and dst != x_dtype:
                raise Declined(f"the activation's result is cast to {dst}, expected the input dtype {x_dtype}")
        elif t in (aten.mm.default, aten.addmm.default):
            if t is aten.addmm.default and (node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1):
                raise Declined("addmm with alpha/beta != 1")


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by the fused op is exact, else the reason it is not."""
    kw = match.kwargs
    x, wg, wu = _val(kw["x"]), _val(kw["w_gate"]), _val(kw["w_up"])
    if x is None or wg is None or wu is None:
        return "tensor metadata missing on the matched nodes"
    out = _val(match.output_node())
    try:
        _check_ignored_args(match, x.dtype, spec.op_activation)
    except Declined as e:
        return str(e)
    if len(x.shape) and any(statically_equal(d, 0) for d in x.shape[:-1]):
        return "x has no rows (an empty batch): nothing to fuse"
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"dtype {x.dtype} is not fp16, bf16 or fp32"
    if wg.dtype != x.dtype or wu.dtype != x.dtype:
        return f"mixed dtypes: x {x.dtype}, w_gate {wg.dtype}, w_up {wu.dtype}"
    if not (x.device == wg.device == wu.device):
        return "inputs on different devices"
    if x.device.type == "cpu" and not config.fuse_on_cpu:
        return "CPU graph and fuse_on_cpu=False"
    if x.device.type not in ("cpu", "cuda"):
        return f"device {x.device.type} is not supported"
    if wg.dim() != 2 or wu.dim() != 2:
        return "weights are not 2-D"
    n_dim, k_dim = (1, 0) if spec.projection.weights_in_out else (0, 1)
    N, K = wg.shape[n_dim], wg.shape[k_dim]
    if not (statically_equal(wu.shape[0], wg.shape[0]) and statically_equal(wu.shape[1], wg.shape[1])):
        return f"gate {list(wg.shape)} and up {list(wu.shape)} weights differ in shape"
    if not statically_equal(x.shape[-1], K):
        return f"x has {x.shape[-1]} features, weights expect {K}"
    for name in ("b_gate", "b_up"):
        if name in kw:
            b = _val(kw[name])
            if b is None or b.dim() != 1 or not statically_equal(b.shape[0], N) or b.dtype != x.dtype:
                return f"{name} is not a [{N}] {x.dtype} vector"
    if out is None or out.dtype != x.dtype:
        return "the product's dtype differs from x's"
    expected = (*x.shape[:-1], N)
    if len(out.shape) != len(expected) or not all(statically_equal(a, b) for a, b in zip(out.shape, expected)):
        return f"output shape {list(out.shape)} is not x's leading shape + [N] = {list(expected)}"
    return ""


def _hopper(device: torch.device) -> bool:
    return device.type == "cuda" and is_hopper(device)


def _dispatch_for(x, N, K, biased: bool) -> str:
    if x.device.type == "cpu":
        impl = cpu_impl(x.dtype)
        if impl == impl_stats.REFERENCE_CPU:
            return f"{impl} (CPU graph)"
        return f"{impl} (CPU graph: the GEMMs in the input dtype, as stock Inductor)"
    if not _hopper(x.device):
        if biased:
            return "unfused (biases; GPU is not Hopper)"
        # The C++ op launches Triton only inside CUDA graphs; the Python one on every call.
        return ("unfused eagerly, triton inside CUDA graphs (GPU is not Hopper)" if native.enabled()
                else "triton (GPU is not Hopper)")
    if biased or x.dtype == torch.float32:
        return "unfused: " + ("biases are not fused by the kernels" if biased else "fp32 (the fused kernels take bf16/fp16)")
    numel_leading = 1
    for s in x.shape[:-1]:
        numel_leading = numel_leading * s
    if isinstance(numel_leading, int) and isinstance(N, int) and isinstance(K, int):
        return dispatch.describe(numel_leading, N, K)
    return "chosen per call from M (dynamic shape): " + (
        "the measured dispatch table" if not dispatch.provisional() else "the default rule (no measured table)")


def use_native_op(graph: torch.fx.Graph) -> int:
    """Point CUDA rewrites on Hopper at swiglu_forward, whose kernel is C++; returns how many.

    After the patterns are applied, not in the replacement itself: the replacement is traced
    once, device-free, and only here is the device known.  Elsewhere (CPU, other GPUs, fp64)
    the rewrite keeps calling swiglu, whose Python implementation chooses the path.
    """
    public = torch.ops.inductor_swiglu.swiglu.default
    moved = 0
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not public:
            continue
        x = _val(node.args[0])
        if x is not None and _hopper(x.device) and native_serves(x):
            node.target = torch.ops.inductor_swiglu.swiglu_forward.default
            moved += 1
    return moved


class SwigluFusionPass(CustomGraphPass):
    """Post-grad pass: SwiGLU MLP -> torch.ops.inductor_swiglu.swiglu."""

    def __init__(self, config: PassConfig | None = None) -> None:
        self.config = config or PassConfig()
        self.pm = PatternMatcherPass(pass_name="inductor_swiglu_fusion")
        self._registered = False
        self._register_lock = threading.Lock()
        self._local = threading.local()

    # AOTInductor pickles its inductor_configs, our pass included: keep only the configuration
    # (the lock, the per-thread record and the registered patterns are rebuilt on first use).
    def __getstate__(self) -> dict:
        return {"config": self.config}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"])

    # -- registration, once ------------------------------------------------- #
    def _register(self) -> None:
        with self._register_lock:
            if self._registered:
                return
            for rp in pattern_registry.build_patterns(self.config.variant_key()):
                register_graph_pattern(rp.expr, extra_check=self._make_check(rp.spec), pass_dict=self.pm)(
                    self._make_handler(rp.spec)
                )
            self._registered = True

    def _make_check(self, spec):
        def check(match: Match) -> bool:
            rec: GraphRecord | None = getattr(self._local, "record", None)
            try:
                reason = can_rewrite(match, spec, self.config)
            except Exception as e:  # a bug in the check must not break compilation
                reason = f"internal error in the check: {type(e).__name__}: {e}"
                log.exception("inductor_swiglu: error while checking a SwiGLU match")
            if reason and rec is not None:
                out = match.output_node()
                # several pattern variants can match one product and decline it for one reason
                if not any(m.node == out.name and m.reason == reason for m in rec.near_misses):
                    rec.near_misses.append(NearMiss(source_location(out), reason, out.name))
            return not reason

        return check

    def _make_handler(self, spec):
        def handler(match: Match, *args, **kwargs) -> None:
            rec: GraphRecord | None = getattr(self._local, "record", None)
            out = match.output_node()
            x = _val(kwargs["x"])
            wg = _val(kwargs["w_gate"])
            n_dim, k_dim = (1, 0) if spec.projection.weights_in_out else (0, 1)
            N, K = wg.shape[n_dim], wg.shape[k_dim]
            names = ["x", "w_gate", "w_up"] + (["b_gate", "b_up"] if spec.projection.bias else [])
            location = source_location(out)
            match.replace_by_example(spec.replacement, [kwargs[n] for n in names])
            # torch's own counters too, as Inductor's pattern files do: tlparse and
            # torch._dynamo.utils.counters see the rewrites
            counters["inductor"]["swiglu_fusion"] += 1
            if rec is not None:
                rec.rewrites.append(
                    Rewrite(
                        pattern=spec.name,
                        location=location,
                        x_shape=_show_shape(x.shape),
                        n=int(N) if isinstance(N, int) else str(N),
                        k=int(K) if isinstance(K, int) else str(K),
                        dtype=str(x.dtype).replace("torch.", ""),
                        device=x.device.type,
                        dispatch=_dispatch_for(x, N, K, spec.projection.bias),
                    )
                )

        return handler

    # -- CustomGraphPass ------------------------------------------------------ #
    def __call__(self, graph: torch.fx.Graph) -> None:
        if not self.config.enabled:
            return
        rec = RECORDS.new_graph(current_compile_id())
        capture = RECORDS.capture_text > 0
        if capture:
            rec.graph_before = _graph_text(graph)
        # torch's structured trace (tlparse) gets the graphs before and after the pass as well
        torch._logging.trace_structured("artifact", metadata_fn=lambda: {
            "name": "inductor_swiglu_graph_before", "encoding": "string"}, payload_fn=lambda: _graph_text(graph))
        backup = _snapshot(graph)
        self._local.record = rec
        try:
            self._register()
            if any(n.op == "get_attr" for n in graph.nodes):  # freezing=True: weights are constants
                freezing_canon.canonicalize(graph)
            unpad_projections(graph)    # Inductor's pad_mm padding, where it decided to pad
            merge_equal_copies(graph)   # autocast's per-Linear casts, per-projection clones of x
            split_merged_projections(graph)  # gate_up_proj [2N, K] split in halves -> two projections
            unshare_input_reshapes(graph)   # one reshape of x per projection, as the patterns expect
            vector_input_as_reshapes(graph)  # a 1-D x takes the form of a batched one
            self.pm.apply(graph)
            use_native_op(graph)
            # A variant whose check declined may have been rewritten by another variant.
            live = {n.name for n in graph.nodes}
            rec.near_misses = [m for m in rec.near_misses if m.node in live]
            near_miss.scan(graph, rec)
        except Exception as e:
            _restore(graph, backup)
            rec.rewrites.clear()
            rec.error = f"{type(e).__name__}: {e}"
            RECORDS.pass_errors += 1
            log.warning(
                "inductor_swiglu: the SwiGLU pass failed on graph %s and left it unchanged (%s). "
                "The model still runs, unfused. Please report this with the diagnostics dump.",
                rec.compile_id, rec.error, exc_info=log.isEnabledFor(logging.DEBUG),
            )
        finally:
            self._local.record = None
        if capture:
            rec.graph_after = _graph_text(graph)
        torch._logging.trace_structured("artifact", metadata_fn=lambda: {
            "name": "inductor_swiglu_graph_after", "encoding": "string"}, payload_fn=lambda: _graph_text(graph))
        if rec.rewrites or rec.near_misses:
            log.info(
                "compile %s: %d SwiGLU rewrite(s), %d near miss(es)%s",
                rec.compile_id, len(rec.rewrites), len(rec.near_misses),
                "".join(f"\n  near miss at {m.location or m.node}: {m.reason}" for m in rec.near_misses),
            )

    def uuid(self) -> str:
        extra = "|".join((__version__, QUALNAME, SCHEMA, self.config.to_json(),
                          # decides whether rewrites call swiglu or swiglu_forward
                          "native" if native.enabled() else "python"))
        return get_hash_for_files(uuid_sources(), extra).hex()


def _graph_text(graph: torch.fx.Graph) -> str:
    gm = graph.owning_module
    try:
        return gm.print_readable(print_output=False, include_stride=True, include_device=True)
    except Exception:  # printing must never break a compile
        return str(graph)


def _snapshot(graph: torch.fx.Graph) -> torch.fx.Graph:
    backup = torch.fx.Graph()
    out = backup.graph_copy(graph, {})
    backup.output(out)
    return backup


def _restore(graph: torch.fx.Graph, backup: torch.fx.Graph) -> None:
    """Put the nodes of `backup` back into `graph`, keeping its placeholders."""
    for node in reversed(list(graph.nodes)):
        if node.op != "placeholder":
            graph.erase_node(node)
    live = [n for n in graph.nodes if n.op == "placeholder"]
    saved = [n for n in backup.nodes if n.op == "placeholder"]
    val_map = dict(zip(saved, live))
    out = graph.graph_copy(backup, val_map)
    graph.output(out)
    graph.lint()


class ChainedPass(CustomGraphPass):
    """Our pass followed by the one the user had installed; never overwrites it."""

    def __init__(self, first: CustomGraphPass, then) -> None:
        self.first = first
        self.then = then

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.first(graph)
        self.then(graph)

    def uuid(self):
        other = self.then.uuid() if hasattr(self.then, "uuid") else None
        if other is None:
            return None  # the user's pass cannot be cached, so neither can the chain
        return hashlib.sha256(f"{self.first.uuid()}|{other!r}".encode()).hexdigest()


def compose(ours: CustomGraphPass, existing) -> CustomGraphPass:
    if existing is None or existing is ours:
        return ours
    if isinstance(existing, (list, tuple)):  # torch 2.13 accepts lists in the config slot
        chained: CustomGraphPass = ours
        for p in existing:
            chained = ChainedPass(chained, p)
        return chained
    return ChainedPass(ours, existing)

