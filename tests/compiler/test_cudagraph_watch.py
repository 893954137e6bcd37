"""CUDA-graph skips are said in our log, and a skip caused by our op is an error.

On CPU nothing asks for CUDA graphs, so skips are reported here the way Inductor reports
them (log_cudagraph_skip_and_bump_counter), after our backend compiled something."""

import torch
from mlp_models import GatedMLP
from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

import inductor_swiglu


def _compile_once():
    with torch.no_grad():
        torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")(torch.randn(3, 32))


def test_skip_not_caused_by_our_op_is_a_warning(isw_logs):
    _compile_once()
    reason = "skipping cudagraphs due to mutated inputs (1 instances)"
    log_cudagraph_skip_and_bump_counter(reason)
    recs = [r for r in isw_logs.records if r.name == "inductor_swiglu.cudagraphs"]
    assert [r.levelname for r in recs] == ["WARNING"]
    assert "not caused by inductor_swiglu" in recs[0].getMessage() and reason in recs[0].getMessage()
    assert inductor_swiglu.counters()["cudagraph_skip_reasons"] == [{"reason": reason, "caused_by_inductor_swiglu": False}]


def test_skip_caused_by_our_op_is_an_error_and_tops_the_diagnostics(isw_logs, tmp_path):
    reason = "skipping cudagraphs due to incompatible op inductor_swiglu.swiglu.default"
    with inductor_swiglu.diagnostics(tmp_path / "dump", depyf=False) as d:
        _compile_once()
        log_cudagraph_skip_and_bump_counter(reason)
    recs = [r for r in isw_logs.records if r.name == "inductor_swiglu.cudagraphs"]
    assert [r.levelname for r in recs] == ["ERROR"]
    assert "because of the inductor_swiglu op" in recs[0].getMessage() and "please report" in recs[0].getMessage()
    assert inductor_swiglu.counters()["cudagraph_skip_reasons"] == [{"reason": reason, "caused_by_inductor_swiglu": True}]
    first = d.summary["advice"][0]["text"]
    assert "BECAUSE OF THE inductor_swiglu OP" in first and reason in first


def test_watch_is_installed_once():
    import logging

    from inductor_swiglu.compiler.cudagraph_watch import CUDAGRAPH_LOGGER, _SkipWatch

    _compile_once()
    _compile_once()
    handlers = [h for h in logging.getLogger(CUDAGRAPH_LOGGER).handlers if isinstance(h, _SkipWatch)]
    assert len(handlers) == 1
