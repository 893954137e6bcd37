"""The post-grad pass manager: its pass list, what it records per pass, the dump's per-pass files,
and a pass that raises."""

import json
import pickle
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.compiler.inductor_pass import GraphPass
from inductor_swiglu.compiler.pass_config import PassConfig
from inductor_swiglu.compiler.pass_manager import PostGradPassManager
from inductor_swiglu.compiler.passes.fusion.swiglu import SwigluFusion
from inductor_swiglu.compiler.passes.utility.use_native_op import UseNativeOp
from inductor_swiglu.compiler.records import RECORDS

DEFAULT_ORDER = [
    "unfreeze_weights",
    "unpad_projections",
    "scaled_mm_v2_as_scaled_mm",
    "merge_equal_copies",
    "split_merged_projections",
    "unshare_input_reshapes",
    "vector_input_as_reshapes",
    "fp8_weight_only_fusion",
    "fp8_weight_only_down_fusion",
    "swiglu_fusion",
    "scaled_swiglu_fusion",
    "fold_product_reshapes",
    "scaled_down_fusion",
    "merge_fp8_mlp",
    "swiglu_grouped_fusion",
    "use_native_op",
    "lower_gated_mlp",
    "report_near_misses",
    "restore_scaled_mm_v2",
]


class MergedGateUp(nn.Module):
    """gate and up in one [2N, K] weight, chunked: split_merged_projections makes it two projections."""

    def __init__(self, K: int = 16, N: int = 24):
        super().__init__()
        self.gate_up_proj = nn.Linear(K, 2 * N, bias=False)
        self.down_proj = nn.Linear(N, K, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


def _run(model, x):
    with torch.no_grad():
        return torch.compile(model, backend="inductor_swiglu")(x), model(x)


def _ops(graph_text: str) -> list[str]:
    """The ops a printed graph calls, in order (node names change when a graph is restored)."""
    return re.findall(r"torch\.ops\.[\w.]+", graph_text)


def _changes(rec) -> dict:
    return {p.name: p.changes for p in rec.passes}


def test_default_pass_list_and_order():
    manager = PostGradPassManager()
    assert [p.name for p in manager.passes] == DEFAULT_ORDER
    assert all(isinstance(p, GraphPass) for p in manager.passes)
    assert PostGradPassManager(PassConfig(enabled=False)).passes == []
    # every pass hashes its own source into the manager's cache key
    assert all(len(p.uuid()) == 64 for p in manager.passes)


def test_lowering_the_training_form_needs_the_training_rewrite_and_can_be_switched_off():
    without = [n for n in DEFAULT_ORDER if n != "lower_gated_mlp"]
    assert [p.name for p in PostGradPassManager(PassConfig(lower_gated_mlp=False)).passes] == without
    assert "lower_gated_mlp" not in [p.name for p in PostGradPassManager(PassConfig(gated_mlp=False)).passes]


def test_pickling_rebuilds_the_passes():
    manager = pickle.loads(pickle.dumps(PostGradPassManager(PassConfig(activations=("silu",)))))
    assert [p.name for p in manager.passes] == DEFAULT_ORDER
    assert manager.config.activations == ("silu",)


def test_uuid_covers_each_pass(monkeypatch):
    before = PostGradPassManager().uuid()
    monkeypatch.setattr(SwigluFusion, "uuid", lambda self: "0" * 64)
    assert PostGradPassManager().uuid() != before


def test_each_pass_change_count_lands_in_the_record():
    out, ref = _run(GatedMLP(32, 48), torch.randn(4, 32))
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    rec, = RECORDS.graphs
    assert [p.name for p in rec.passes] == DEFAULT_ORDER
    assert _changes(rec) == {**dict.fromkeys(DEFAULT_ORDER, 0), "swiglu_fusion": 1}
    assert all(p.ms >= 0 and not p.error for p in rec.passes)
    assert not any(p.graph_after for p in rec.passes), "graph text is kept only while diagnostics record"
    # counters() reports the passes too, without graph text
    g = inductor_swiglu.counters()["per_frame"][0]["graphs"][0]
    assert [(p["name"], p["changes"]) for p in g["passes"]] == [(p.name, p.changes) for p in rec.passes]
    assert "graph_after" not in g["passes"][0]


@pytest.mark.parametrize("shape", [(3, 16), (2, 3, 16)])
def test_merged_gate_up_is_counted_by_split_merged_projections(shape):
    out, ref = _run(MergedGateUp(), torch.randn(*shape))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    changes = _changes(RECORDS.graphs[0])
    assert changes["split_merged_projections"] == 1 and changes["swiglu_fusion"] == 1, changes


def test_dump_has_a_file_per_pass_that_changed_the_graph(tmp_path):
    dump = tmp_path / "dump"
    with inductor_swiglu.diagnostics(dump, depyf=False) as d:
        _run(MergedGateUp(), torch.randn(3, 16))
    cdir = dump / "frames" / "0_forward" / "0-0"
    split = cdir / f"graph_0.after_{DEFAULT_ORDER.index('split_merged_projections'):02d}_split_merged_projections.py"
    fused = cdir / f"graph_0.after_{DEFAULT_ORDER.index('swiglu_fusion'):02d}_swiglu_fusion.py"
    assert split.is_file() and fused.is_file(), sorted(p.name for p in cdir.iterdir())
    # the split graph has two projections on the weight's halves and no fused op yet
    text = split.read_text()
    assert "split_merged_projections (1 change(s)" in text
    assert text.count("aten.mm.default(") == 3 and "inductor_swiglu.swiglu" not in text
    assert "torch.ops.inductor_swiglu.swiglu.default(" in fused.read_text()
    # passes that changed nothing get no file; the files kept before get their usual content
    unchanged = DEFAULT_ORDER.index("scaled_swiglu_fusion")
    assert not list(cdir.glob("graph_0.after_00_*")) and not list(cdir.glob(f"graph_0.after_{unchanged:02d}_*"))
    assert "inductor_swiglu.swiglu" in (cdir / "graph_0.after_pass.py").read_text()
    assert "inductor_swiglu.swiglu" not in (cdir / "graph_0.before_pass.py").read_text()

    # every pass, with its changes and time, per graph: summary, patterns and frame report
    entry, = d.summary["passes"]
    assert [p["name"] for p in entry["passes"]] == DEFAULT_ORDER
    assert {p["name"]: p["changes"] for p in entry["passes"]}["split_merged_projections"] == 1
    assert json.loads((dump / "summary.json").read_text())["passes"] == d.summary["passes"]
    for md in ("summary.md", "patterns.md"):
        text = (dump / md).read_text()
        assert "| compile | graph | " + " | ".join(DEFAULT_ORDER) + " | total |" in text, md
        assert "| 0/0 | 0 | 0 · " in text, md
    assert json.loads((dump / "patterns.json").read_text())["passes"] == d.summary["passes"]
    frame_md = (dump / "frames" / "0_forward" / "frame.md").read_text()
    assert f"split_merged_projections 1 ([graph after](0-0/{split.name}))" in frame_md


def test_a_pass_that_raises_leaves_the_graph_unchanged(monkeypatch):
    def boom(self, graph):
        raise RuntimeError("injected pass failure")

    # after swiglu_fusion rewrote the graph: the rewrite must be undone too
    monkeypatch.setattr(UseNativeOp, "__call__", boom)
    monkeypatch.setattr(RECORDS, "capture_text", 1)
    out, ref = _run(GatedMLP(32, 48), torch.randn(4, 32))
    torch.testing.assert_close(out, ref)
    rec, = RECORDS.graphs
    assert rec.error == "use_native_op: RuntimeError: injected pass failure"
    assert _ops(rec.graph_after) == _ops(rec.graph_before) and "inductor_swiglu.swiglu" not in rec.graph_after
    assert not rec.rewrites
    # the passes up to the one that raised are recorded; none after it ran
    assert [p.name for p in rec.passes] == DEFAULT_ORDER[:DEFAULT_ORDER.index("use_native_op") + 1]
    assert rec.passes[-1].error == "RuntimeError: injected pass failure" and rec.passes[-1].changes == 0
    assert "inductor_swiglu.swiglu" in rec.passes[DEFAULT_ORDER.index("swiglu_fusion")].graph_after
    c = inductor_swiglu.counters()
    assert c["pass_errors"] == 1 and c["swiglu_rewrites"] == 0 and c["swiglu_ops_in_output_code"] == 0
