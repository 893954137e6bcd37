"""The diagnostics dump: ``with inductor_swiglu.diagnostics(dir)`` and ``python -m inductor_swiglu diagnose``.

One small model holds a SwiGLU the pass rewrites (a hit) and one it declines
(gate and up read different inputs: a near miss); it is called so that it
recompiles once for a Python int argument and once for a size change.
"""

import importlib.util
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import repo_paths
import torch
import torch.nn as nn
import torch.nn.functional as F
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.diagnostics import cli, guards
from inductor_swiglu.diagnostics.session import MARKER

HAS_DEPYF = importlib.util.find_spec("depyf") is not None
REPO = repo_paths.REPO


class HitAndMiss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = GatedMLP(32, 48)
        self.g2 = nn.Linear(32, 48, bias=False)
        self.u2 = nn.Linear(32, 48, bias=False)

    def forward(self, x, y, scale: int):
        hit = self.mlp(x)
        miss = F.silu(self.g2(x)) * self.u2(y)  # gate and up read different inputs
        return hit * scale + miss.sum()


def _run_recompiling(model):
    with torch.no_grad():
        model(torch.randn(4, 32), torch.randn(4, 32), 2)
        model(torch.randn(4, 32), torch.randn(4, 32), 3)  # Python int changed: recompile
        model(torch.randn(6, 32), torch.randn(6, 32), 3)  # size changed: recompile


def _summary(dump: Path) -> dict:
    return json.loads((dump / "summary.json").read_text())


def test_api_dump_files_and_counts(tmp_path):
    dump = tmp_path / "dump"
    model = torch.compile(HitAndMiss(), backend="inductor_swiglu")
    with inductor_swiglu.diagnostics(dump) as d:
        _run_recompiling(model)

    c = d.summary["counts"]
    assert (c["frames"], c["recompiles"], c["rewrites"], c["near_misses"], c["cudagraph_skips"]) == (3, 2, 3, 3, 0)
    assert c["graphs"] == 3 and c["guards"] > 0 and c["pass_errors"] == 0 and c["graphs_from_cache"] == 0
    assert _summary(dump)["counts"] == c
    for name in ("summary.md", "summary.json", "patterns.md", "patterns.json", "cudagraphs.md", "records.json", MARKER):
        assert (dump / name).is_file(), name

    # Per frame: guards, every failed guard in order, FX graph before/after the pass, Inductor's code.
    frame_dir = dump / "frames" / "0_forward"
    frame_md = (frame_dir / "frame.md").read_text()
    assert "recompile #1" in frame_md and "scale == 2" in frame_md and "size mismatch at index 0" in frame_md
    assert frame_md.index("scale == 2") < frame_md.index("size mismatch")
    for cid in ("0-0", "0-1", "0-2"):
        assert "TREE_GUARD_MANAGER" in (frame_dir / cid / "guards.txt").read_text()
        before = (frame_dir / cid / "graph_0.before_pass.py").read_text()
        after = (frame_dir / cid / "graph_0.after_pass.py").read_text()
        code = (frame_dir / cid / "graph_0.inductor_output_code.py").read_text()
        assert "aten.mm" in before and "inductor_swiglu.swiglu" not in before
        assert "inductor_swiglu.swiglu" in after
        assert "torch.ops.inductor_swiglu.swiglu.default(" in code
    assert "size [None, 32]" in frame_md  # the recompiled graph is dynamic in dim 0

    # Pattern report: the hit with its location, shapes and kernel; the near miss with its reason.
    patterns = json.loads((dump / "patterns.json").read_text())
    assert len(patterns["rewrites"]) == 3 and len(patterns["near_misses"]) == 3
    rw = patterns["rewrites"][0]
    assert rw["location"].startswith(str(REPO / "tests" / "mlp_models.py"))
    assert (rw["x_shape"], rw["n"], rw["k"], rw["dtype"]) == ([4, 32], 48, 32, "float32")
    assert rw["dispatch"].startswith("reference_cpu")
    nm = patterns["near_misses"][0]
    assert "different inputs" in nm["reason"] and "test_diagnostics.py" in nm["location"]

    # The summary says what to do, naming the variable and the fix.
    s = d.summary
    assert [r["kind"] for r in s["recompiles"]] == ["value", "size"]
    md = (dump / "summary.md").read_text()
    assert md.startswith("# inductor_swiglu diagnostics")
    assert "torch._dynamo.mark_dynamic(x, 0)" in md
    assert "`scale` is a Python number" in md and "torch.tensor(scale)" in md
    assert "gate and up read different inputs" in md and "test_diagnostics.py" in md
    assert len(md.splitlines()) < 60, "the summary must stay short"


@pytest.mark.skipif(not HAS_DEPYF, reason="depyf is not installed (pip install 'inductor_swiglu[diagnostics]')")
def test_depyf_dump(tmp_path):
    dump = tmp_path / "dump"
    model = torch.compile(HitAndMiss(), backend="inductor_swiglu")
    with inductor_swiglu.diagnostics(dump) as d:
        _run_recompiling(model)
    dep = d.summary["depyf"]
    assert dep["ok"], dep["errors"]
    names = os.listdir(dump / "depyf")
    assert any(n.startswith("full_code_for_forward") for n in names)
    assert any("AFTER_POST_GRAD" in n for n in names)
    assert any(".kernel_" in n for n in names)  # Inductor's code, loaded through the shim
    assert d.summary["counts"]["rewrites"] == 3


def _set_sys_modules_supported() -> bool:
    from torch._inductor.codecache import PyCodeCache

    return "set_sys_modules" in inspect.signature(PyCodeCache.load_by_key_path).parameters


@pytest.mark.skipif(not HAS_DEPYF, reason="depyf is not installed")
@pytest.mark.skipif(not _set_sys_modules_supported(), reason="this torch never passes set_sys_modules (2.11)")
@pytest.mark.filterwarnings("ignore:.*You are trying to debug")
def test_depyf_shim_accepts_torch_213_keywords(tmp_path):
    """torch 2.13's autotuning loads modules with set_sys_modules=False, which depyf 0.20 rejects."""
    import depyf
    from torch._inductor.codecache import PyCodeCache

    with depyf.prepare_debug(str(tmp_path / "plain")):
        with pytest.raises(TypeError, match="set_sys_modules"):
            PyCodeCache.load("x = 1\n", set_sys_modules=False)

    with inductor_swiglu.diagnostics(tmp_path / "dump") as d:
        assert PyCodeCache.load("x = 2\n", set_sys_modules=False).x == 2
    assert d.summary["depyf"]["ok"], d.summary["depyf"]["errors"]
    assert "set_sys_modules" in d.summary["depyf"]["shim"]
    assert any(".kernel_" in n for n in os.listdir(tmp_path / "dump" / "depyf"))


def test_depyf_failure_is_reported_not_raised(tmp_path, monkeypatch):
    if HAS_DEPYF:
        from depyf.explain import enable_debugging

        def broken(*a, **k):
            raise RuntimeError("simulated depyf breakage")

        monkeypatch.setattr(enable_debugging, "prepare_debug", broken)
        expected = "simulated depyf breakage"
    else:
        expected = "depyf is not installed"
    dump = tmp_path / "dump"
    model = torch.compile(HitAndMiss(), backend="inductor_swiglu")
    with inductor_swiglu.diagnostics(dump) as d:
        _run_recompiling(model)
    assert not d.summary["depyf"]["ok"] and expected in d.summary["depyf"]["errors"][0]
    md = (dump / "summary.md").read_text()
    assert "**failed**, the rest of the dump is complete" in md and expected in md
    assert d.summary["counts"]["rewrites"] == 3 and d.summary["counts"]["recompiles"] == 2
    assert (dump / "frames" / "0_forward" / "0-2" / "graph_0.after_pass.py").exists()


@pytest.mark.skipif(not HAS_DEPYF, reason="depyf is not installed")
def test_depyf_decompile_failure_keeps_the_compile(tmp_path, monkeypatch):
    """depyf's decompiler fails on much of Python 3.12's bytecode (SWAP, BEFORE_WITH,
    PUSH_EXC_INFO): the compile must go on with Dynamo's own bytecode, and the summary say so."""
    from depyf.decompiler import DecompilationError, Decompiler

    def fails(self, *a, **k):
        raise DecompilationError("simulated: Failed to decompile instruction SWAP")

    monkeypatch.setattr(Decompiler, "decompile", fails)
    model = torch.compile(HitAndMiss(), backend="inductor_swiglu")
    with inductor_swiglu.diagnostics(tmp_path / "dump") as d:
        _run_recompiling(model)
    dep = d.summary["depyf"]
    assert not dep["ok"] and any("decompiling forward failed" in e for e in dep["errors"])
    assert d.summary["counts"]["rewrites"] == 3 and d.summary["counts"]["recompiles"] == 2
    assert "**failed**" in (tmp_path / "dump" / "summary.md").read_text()


def test_depyf_not_installed_is_reported(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "depyf", None)  # import depyf -> ImportError
    with inductor_swiglu.diagnostics(tmp_path / "dump") as d:
        with torch.no_grad():
            torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")(torch.randn(3, 32))
    assert "depyf is not installed" in d.summary["depyf"]["errors"][0]
    assert d.summary["counts"]["rewrites"] == 1


def test_recompile_storm_and_recompile_limit(tmp_path):
    model = torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False, recompile_limit=4):
        with inductor_swiglu.diagnostics(tmp_path / "dump", depyf=False) as d:
            with torch.no_grad():
                for n in range(2, 9):
                    model(torch.randn(n, 32))
    s = d.summary
    assert s["counts"]["recompiles"] == 3 and s["counts"]["recompile_limit_hits"] >= 1
    first, second = s["advice"][0]["text"], s["advice"][1]["text"]
    assert "hit torch._dynamo.config.recompile_limit (4)" in first and "runs eagerly" in first
    line = inspect.getsourcelines(GatedMLP.forward)[1]
    assert "dim 0 of `x`" in second and f"recompiled forward (mlp_models.py:{line}) 3 times" in second
    assert "mark_dynamic(x, 0)" in second and "automatic_dynamic_shapes is off" in second


def test_cudagraph_skip_reasons(tmp_path):
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    reason = "skipping cudagraphs due to mutated inputs (1 instances)"
    with inductor_swiglu.diagnostics(tmp_path / "dump", depyf=False) as d:
        with torch.no_grad():
            torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")(torch.randn(3, 32))
        # Skips are reported from compile and from run time; on CPU nothing asks for
        # CUDA graphs, so report one the way Inductor does.
        log_cudagraph_skip_and_bump_counter(reason)
    assert d.summary["counts"]["cudagraph_skips"] == 1
    assert d.summary["cudagraph_skip_reasons"] == [reason]
    md = (tmp_path / "dump" / "summary.md").read_text()
    assert "mode='reduce-overhead' did not apply CUDA graphs 1 time(s) because: " + reason in md
    assert reason in (tmp_path / "dump" / "cudagraphs.md").read_text()


def test_graph_breaks_are_reported_with_where(tmp_path):
    mlp = GatedMLP(32, 48)

    def two_halves(x):
        y = mlp(x)
        print("step")  # a graph break
        return mlp(y)

    compiled = torch.compile(two_halves, backend="inductor_swiglu")
    with inductor_swiglu.diagnostics(tmp_path / "dump", depyf=False) as d:
        with torch.no_grad():
            compiled(torch.randn(4, 32))
    c = d.summary["counts"]
    assert (c["graph_breaks"], c["functions"], c["rewrites"]) == (1, 2, 2)
    line = inspect.getsourcelines(two_halves)[1] + 2
    text = next(a["text"] for a in d.summary["advice"] if "graph break" in a["text"])
    assert f"at two_halves:{line}" in text and "print" in text and "fullgraph=True" in text


def test_graphs_from_cache_are_reported(tmp_path, monkeypatch):
    # A private cache: entries left in the shared one would be hit by other tests
    # (torch 2.13's config patches are per thread, so threads compile with caches on).
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor_cache"))
    with torch._inductor.config.patch(force_disable_caches=False, fx_graph_cache=True):
        with torch.no_grad():
            torch.compile(GatedMLP(40, 56), backend="inductor_swiglu")(torch.randn(3, 40))  # fills the cache
        torch._dynamo.reset()
        with inductor_swiglu.diagnostics(tmp_path / "dump", depyf=False, disable_caches=False) as d:
            with torch.no_grad():
                torch.compile(GatedMLP(40, 56), backend="inductor_swiglu")(torch.randn(3, 40))
    c = d.summary["counts"]
    assert c["graphs_from_cache"] == 1 and c["rewrites"] == 0
    assert "loaded from a compile cache" in (tmp_path / "dump" / "summary.md").read_text()


def test_nothing_compiled_and_dir_safety(tmp_path):
    with inductor_swiglu.diagnostics(tmp_path / "empty", depyf=False) as d:
        pass
    assert d.summary["counts"]["frames"] == 0
    assert "nothing was compiled" in d.summary["advice"][0]["text"]
    # An earlier dump is replaced; a folder of the user's is never touched.
    with inductor_swiglu.diagnostics(tmp_path / "empty", depyf=False):
        pass
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="not an earlier dump"):
        with inductor_swiglu.diagnostics(mine):
            pass
    assert (mine / "notes.txt").read_text() == "keep"


def test_dump_is_written_when_the_block_raises(tmp_path):
    model = torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")
    with pytest.raises(ValueError, match="user bug"):
        with inductor_swiglu.diagnostics(tmp_path / "dump", depyf=False):
            with torch.no_grad():
                model(torch.randn(3, 32))
            raise ValueError("user bug")
    s = _summary(tmp_path / "dump")
    assert "user bug" in s["run_error"] and s["counts"]["rewrites"] == 1
    assert "The run raised" in (tmp_path / "dump" / "summary.md").read_text()


def test_package_is_callable_and_importable():
    import inductor_swiglu.diagnostics.session as session_mod

    assert callable(inductor_swiglu.diagnostics)
    assert isinstance(inductor_swiglu.diagnostics("x"), session_mod.Session)


@pytest.mark.parametrize("reason, kind, subject", [
    ("0/0: tensor 'x' size mismatch at index 1. expected 16, actual 17", "size", "x"),
    ("0/1: tensor 'L['x']' dtype mismatch. expected Float, actual BFloat16", "dtype", "x"),
    ("0/0: tensor 'x' stride mismatch at index 0. expected 8, actual 16", "stride", "x"),
    ("0/0: L['scale'] == 2                  # return x * scale  # m.py:3 in f", "value", "scale"),
    ("0/0: flag == True  # if flag:", "value", "flag"),
    ("0/3: len(xs) == 2  # for t in xs:", "length", "xs"),
    ("0/1: 2 <= L['x'].size()[0]  # ... (0/1 specialization)", "dynamic_size", "x"),
    ("0/7: ___check_obj_id(G['ACT'].__code__, 1401), type=<class 'code'>", "identity", "ACT.__code__"),
    ("0/0: GLOBAL_STATE changed: grad_mode ", "global_state", ""),
])
def test_guard_failure_classification(reason, kind, subject):
    c = guards.classify(reason)
    assert (c.kind, c.subject) == (kind, subject)


# -- the command ---------------------------------------------------------------- #
SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(32, 48, bias=False)
            self.up = nn.Linear(32, 48, bias=False)
            self.down = nn.Linear(48, 32, bias=False)

        def forward(self, x, scale: int):
            return self.down(F.silu(self.gate(x)) * self.up(x)) * scale

    def main():
        model = torch.compile(MLP(), backend="inductor_swiglu")
        with torch.no_grad():
            for n, scale in ((4, 2), (4, 3), (6, 3)):
                model(torch.randn(n, 32), scale)

    if __name__ == "__main__":
        assert sys.argv[1:] == ["--tokens", "3"], sys.argv
        main()
""")


def _check_cli_dump(dump: Path, target: str) -> None:
    s = _summary(dump)
    assert target in s["target"]
    c = s["counts"]
    assert (c["frames"], c["recompiles"], c["rewrites"], c["near_misses"]) == (3, 2, 3, 0)
    assert (dump / "frames" / "0_forward" / "0-1" / "guards.txt").read_text().startswith("TREE_GUARD_MANAGER")
    assert "mark_dynamic(x, 0)" in (dump / "summary.md").read_text()


def test_cli_script_in_process(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    argv_before = list(sys.argv)
    rc = cli.main(["--out", str(tmp_path / "dump"), "--no-depyf", str(script), "--tokens", "3"])
    assert rc == 0 and sys.argv == argv_before
    _check_cli_dump(tmp_path / "dump", "train.py --tokens 3")
    assert "## What to do" in capsys.readouterr().out


def test_cli_module_function_in_process(tmp_path, monkeypatch):
    (tmp_path / "isw_diag_target.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = cli.main(["-q", "--out", "dump", "--no-depyf", "isw_diag_target:main"])
    assert rc == 0
    _check_cli_dump(tmp_path / "dump", "isw_diag_target:main")


def test_cli_failing_script_still_dumps(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(SCRIPT.replace('    assert sys.argv[1:] == ["--tokens", "3"], sys.argv\n    main()', "    main()\n    raise SystemExit(3)"))
    rc = cli.main(["-q", "--out", str(tmp_path / "dump"), "--no-depyf", str(script)])
    assert rc == 3
    assert _summary(tmp_path / "dump")["counts"]["rewrites"] == 3


@pytest.mark.parametrize("target, words", [
    ("missing_script.py", "no such script"),
    ("no_such_module_isw:main", "no module named 'no_such_module_isw'"),
    ("json:no_such_function", "'json' has no attribute 'no_such_function'"),
])
def test_cli_bad_target_is_a_clear_error_and_no_dump(tmp_path, capsys, target, words):
    rc = cli.main(["--out", str(tmp_path / "dump"), "--no-depyf", target])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and "Traceback" not in err, err
    assert not (tmp_path / "dump").exists()


def test_cli_quiet_still_shows_the_targets_exit_message(tmp_path, capsys):
    script = tmp_path / "fatal.py"
    script.write_text('import sys\nsys.exit("fatal: no weights found")\n')
    rc = cli.main(["-q", "--out", str(tmp_path / "dump"), "--no-depyf", str(script)])
    assert rc == 1 and "fatal: no weights found" in capsys.readouterr().err


def test_cli_subprocess(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run(
        [sys.executable, "-m", "inductor_swiglu", "diagnose", "--out", "dump", "run.py", "--tokens", "3"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "## What to do" in proc.stdout and "diagnostics dump:" in proc.stderr
    _check_cli_dump(tmp_path / "dump", "python run.py --tokens 3")
    depyf_status = _summary(tmp_path / "dump")["depyf"]
    assert depyf_status["ok"] == HAS_DEPYF, depyf_status


@pytest.mark.slow
@pytest.mark.transformers
def test_cli_on_the_qwen25_example(tmp_path):
    """The example the README points to: a Qwen2.5-shaped decode loop (1 layer here, on the CPU)."""
    pytest.importorskip("transformers")
    pytest.importorskip("inductor_swiglu.models.qwen2")
    example = REPO / "examples" / "diagnose_qwen25.py"
    rc = cli.main(["-q", "--out", str(tmp_path / "dump"), "--no-depyf", str(example),
                   "--device", "cpu", "--layers", "1", "--prompts", "8,12", "--tokens", "3"])
    assert rc == 0
    s = _summary(tmp_path / "dump")
    c = s["counts"]
    assert c["rewrites"] >= 3 and c["near_misses"] == 0 and c["recompiles"] >= 2
    assert all(r["location"].startswith("modeling_qwen2.py") for r in s["rewrites"])
    assert any("input_ids" in a["text"] and "mark_dynamic" in a["text"] for a in s["advice"])


def test_summary_advises_warming_up_when_a_capture_met_a_cold_triton_key():
    """The C++ op counts a CUDA-graph capture that could not launch the planned Triton kernel
    (no eager call compiled it first); the summary turns the count into an action."""
    from inductor_swiglu.diagnostics.data import RunData
    from inductor_swiglu.diagnostics.summary import build

    d = RunData(target="t", dump_dir=Path("d"))
    d.op_events = {"triton_cold_in_capture": 3}
    texts = [a["text"] for a in build(d, {})["advice"] if a["level"] == "action"]
    assert any(t.startswith("3 CUDA-graph capture(s) of the op took the CUTLASS kernel") for t in texts), texts
    d.op_events = {}
    assert not any("CUDA-graph capture(s)" in a["text"] for a in build(d, {})["advice"])
