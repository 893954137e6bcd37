"""The ``inductor_swiglu`` torch.compile backend: Inductor plus the SwiGLU pass.

    torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")

``torch.compile`` hands a non-inductor backend its ``mode=`` and ``options=`` as
keyword arguments (and applies ``dynamic=`` / ``fullgraph=`` itself, in Dynamo).
We turn them into Inductor config patches exactly as the inductor backend does
(``torch._inductor.list_mode_options``), add our pass in the post-grad slot,
chained after nothing and before any pass the user installed there, and call
``compile_fx``.  The name is registered through the ``torch_dynamo_backends``
entry point, and on ``import inductor_swiglu`` for source checkouts.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from typing import Any

import torch
from torch._inductor.compile_fx import compile_fx, compile_fx_inner

from ..dispatch.forced import warn_if_changed_since_import
from ..ops import swiglu as swiglu_op  # noqa: F401  (registers torch.ops.inductor_swiglu.swiglu)
from . import cudagraph_watch, monitor
from .pass_config import PassConfig
from .pass_manager import PostGradPassManager, compose, current_compile_id
from .pre_grad.install import slot_patch as pre_grad_slot_patch
from .pre_grad.install import training_ops_in
from .records import RECORDS

log = logging.getLogger("inductor_swiglu.compile")

BACKEND_NAME = "inductor_swiglu"
_PASS_SLOT = "post_grad_custom_pre_pass"
# Call sites of the ops the passes write, each weighed by the rewrites it carries: swiglu (CPU
# graphs, GPUs other than Hopper) or swiglu_forward (its C++ form), the FP8 and routed-expert ops,
# and gated_mlp_fp8, an FP8 MLP's two rewrites in one op.  (swiglu_fp8_block comes from a module
# swap, not a rewrite; the C++ op's own helpers never appear in Inductor's code.)
REWRITE_OPS = {"swiglu": 1, "swiglu_forward": 1, "swiglu_fp8": 1, "swiglu_fp8_weight": 1, "linear_fp8": 1,
               "linear_fp8_weight": 1, "swiglu_grouped": 1, "gated_mlp_fp8": 2}
_OP_IN_CODE = re.compile(rf"torch\.ops\.inductor_swiglu\.({'|'.join(REWRITE_OPS)})\.default\(")


def rewrites_in_code(code: str) -> int:
    """The rewrites whose ops Inductor's generated `code` calls (REWRITE_OPS)."""
    return sum(REWRITE_OPS[name] for name in _OP_IN_CODE.findall(code))


@functools.cache
def _pass_for(config: PassConfig) -> PostGradPassManager:
    # One pass object per configuration: patterns register once per process
    # (registering twice raises "Duplicate pattern").
    return PostGradPassManager(config)


def config_patches(mode: str | None, options: dict[str, Any] | None, pass_config: PassConfig) -> dict[str, Any]:
    """Inductor config patches for this compile: mode, user options, our pass."""
    patches: dict[str, Any] = {}
    if mode and mode != "default":
        try:
            patches.update(torch._inductor.list_mode_options(mode))
        except (KeyError, RuntimeError) as e:
            raise ValueError(f"inductor_swiglu: unknown mode {mode!r} ({e})") from None
    options = dict(options or {})
    known = set(torch._inductor.list_options())
    unknown = [k for k in options if k not in known]
    if unknown:
        raise ValueError(
            f"inductor_swiglu: unknown Inductor option(s) {unknown}; see torch._inductor.list_options()"
        )
    patches.update(options)
    existing = options.get(_PASS_SLOT, getattr(torch._inductor.config, _PASS_SLOT))
    patches[_PASS_SLOT] = compose(_pass_for(pass_config), existing)
    # training graphs: the whole MLP becomes one differentiable op before AOTAutograd (compiler/pre_grad/)
    patches.update(pre_grad_slot_patch(options, pass_config))
    return patches


def out_of_process_compile() -> str:
    """'' when Inductor compiles graphs in this process, else its mode (TORCHINDUCTOR_FX_COMPILE_MODE)."""
    from torch._inductor import compile_fx as cfx

    mode = getattr(cfx, "fx_compile_mode", None)
    name = getattr(mode, "name", "NORMAL")
    return "" if name == "NORMAL" and not getattr(cfx, "fx_compile_async", False) else f"{name.lower()}"


def _inner_compile(gm, example_inputs, **kwargs):
    """compile_fx_inner, plus the truth about what it produced.

    On an FX-graph-cache hit the pass does not run; the record then says so, and
    the op is counted in the loaded code instead.
    """
    cid = current_compile_id()
    before = len(RECORDS.graphs_for(cid))
    hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
    training_ops = training_ops_in(gm)   # before the post-grad passes, so that a cache hit counts them too
    compiled = compile_fx_inner(gm, example_inputs, **kwargs)
    graphs = RECORDS.graphs_for(cid)
    if len(graphs) > before:
        rec = graphs[-1]
    else:
        rec = RECORDS.new_graph(cid)
        rec.pass_ran = False
    rec.fx_graph_cache_hit = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] > hits
    rec.gated_mlp_forward_ops, rec.gated_mlp_backward_ops = training_ops
    if not rec.pass_ran:
        if rec.fx_graph_cache_hit:
            rec.not_run_reason = ("Inductor's FX graph cache: the graph was compiled in an earlier run, its rewrites are "
                                  "not known here (the op calls in its code are counted)")
        elif out_of_process_compile():
            rec.not_run_reason = (f"Inductor's out-of-process compile mode ({out_of_process_compile()}): the pass does "
                                  "not run there, this graph was compiled without the fusion")
            log.warning("inductor_swiglu: %s; unset TORCHINDUCTOR_FX_COMPILE_MODE to fuse", rec.not_run_reason)
        else:
            rec.not_run_reason = "the pass did not run on this graph (cause not known)"
    code = getattr(compiled, "source_code", None)
    if isinstance(code, str):
        rec.swiglu_ops_in_output_code = rewrites_in_code(code)
        if RECORDS.capture_text:
            rec.output_code = code
    return compiled


# On torch 2.11 Inductor's config is process-global and config.patch() restores the
# previous value on exit, so two threads compiling at once undo each other's patches
# (our pass silently vanishes from the other thread's compile; 2.13 made the config
# thread-local).  Compiles through this backend take turns, and the inner compile
# (which AOTAutograd may call later, e.g. for a lazy backward) re-applies the patches
# under the same lock.
_COMPILE_LOCK = threading.RLock()


def _locked_inner(patches: dict[str, Any]):
    def inner(gm, example_inputs, **kwargs):
        with _COMPILE_LOCK, torch._inductor.config.patch(patches):
            return _inner_compile(gm, example_inputs, **kwargs)

    return inner


class SwigluBackend:
    """A torch.compile backend with a fixed pass configuration (and optional default mode/options).

    A class at module level, not a closure, so a compiled module that holds it can be pickled
    (``torch.save(torch.compile(m, backend="inductor_swiglu"), f)``), as with ``backend="inductor"``.
    """

    __name__ = BACKEND_NAME

    def __init__(self, pass_config: PassConfig | None = None, mode: str | None = None, options: dict | None = None):
        self.pass_config = pass_config or PassConfig()
        self.default_mode = mode
        self.default_options = dict(options or {})

    def __call__(self, gm: torch.fx.GraphModule, example_inputs, mode: str | None = None,
                 options: dict | None = None, **_ignored):
        monitor.install()
        cudagraph_watch.install()
        warn_if_changed_since_import()
        cid = monitor.on_backend_call(gm)
        patches = config_patches(mode or self.default_mode, {**self.default_options, **(options or {})},
                                 self.pass_config)
        before = len(RECORDS.graphs_for(cid))
        with _COMPILE_LOCK:
            compiled = compile_fx(gm, example_inputs, inner_compile=_locked_inner(patches), config_patches=patches)
        if len(RECORDS.graphs_for(cid)) == before:
            # AOTAutograd's cache returned a compiled graph without calling Inductor:
            # neither the pass nor our inner hook ran.  Say so rather than report 0 rewrites.
            rec = RECORDS.new_graph(cid)
            rec.pass_ran = False
            rec.aot_autograd_cache_hit = True
            rec.not_run_reason = ("AOTAutograd's cache: the compiled graph was loaded without running Inductor; "
                                  "its rewrites and op calls are not known here")
        return compiled

    def reset(self) -> None:
        """torch._dynamo.reset() calls backend.reset(): drop CUDA-graph trees like inductor does."""
        _reset()


def inductor_configs(pass_config: PassConfig | None = None, mode: str | None = None,
                     options: dict | None = None) -> dict[str, Any]:
    """Inductor config patches that install the SwiGLU pass, for compiles that do not go through
    this backend: ``torch._inductor.aoti_compile_and_package(ep, inductor_configs=...)`` (the
    package then needs ``import inductor_swiglu`` where it is loaded, for the op) or
    ``torch._inductor.config.patch(...)``."""
    return config_patches(mode, options, pass_config or PassConfig())


def make_backend(pass_config: PassConfig | None = None, mode: str | None = None, options: dict | None = None):
    """A backend callable with a fixed pass configuration (and optional default mode/options)."""
    return SwigluBackend(pass_config, mode, options)


def _reset() -> None:
    from torch._inductor.cudagraph_trees import reset_cudagraph_trees

    reset_cudagraph_trees()
    monitor.reset_history()


inductor_swiglu = make_backend()


def register() -> None:
    """Make backend="inductor_swiglu" work in a source checkout that was never pip-installed.

    When the package is installed, its ``torch_dynamo_backends`` entry point
    does this lazily; registering here as well would make torch's entry-point
    loader fail with "duplicate name" (it loads this module, then registers).
    """
    from importlib.metadata import entry_points

    if any(ep.name == BACKEND_NAME for ep in entry_points(group="torch_dynamo_backends")):
        return
    if BACKEND_NAME not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(inductor_swiglu, name=BACKEND_NAME)
