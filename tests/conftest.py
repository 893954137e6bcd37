import logging
import random

import pytest
import torch
from cpu_support import rowwise_scaled_mm_reason, triton_interpreter_reason

import inductor_swiglu


@pytest.fixture(autouse=True)
def _fresh_compiler_state():
    """Each test starts from a clean Dynamo cache and clean counters, with Inductor's
    caches disabled: on an FX-graph-cache hit the pass does not run, so rewrite
    counts would depend on test order."""
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    torch.manual_seed(0)
    random.seed(0)
    with torch._inductor.config.patch(force_disable_caches=True):
        yield
    torch._dynamo.reset()


@pytest.fixture
def interpreter(monkeypatch):
    """Triton's interpreter for one test: its kernels then run on CPU tensors (modules that run
    only interpreted kernels switch it on for the whole module instead: see test_triton_swiglu.py)."""
    if triton_interpreter_reason():
        pytest.skip(triton_interpreter_reason())
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture(scope="module")
def interpreter_for_module():
    """Triton's interpreter for a whole module of interpreted kernels (``pytestmark =
    pytest.mark.usefixtures("interpreter_for_module")``): see test_triton_swiglu.py for why per module."""
    if triton_interpreter_reason():
        pytest.skip(triton_interpreter_reason())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        yield


@pytest.fixture
def rowwise_scaled_mm():
    """For tests whose CPU path runs torch._scaled_mm with per-row scales (torch 2.11's CPU has none)."""
    if rowwise_scaled_mm_reason():
        pytest.skip(rowwise_scaled_mm_reason())


# What `make test` (-m "not slow", the tests every change must pass on a CPU, in minutes) leaves to
# `make test-all` and CI: marked slow here, in one place, by node id (a test, or one of its
# parametrizations, or a prefix of them ending in "[" or "-"), each with why, and where the feature keeps a
# fast case.  A name here that no longer matches a test of a collected file is an error.
SLOW = {
    "tests/csrc/test_interleaved_gemm_layout.py::test_every_interleaved_config_pairs_gate_and_up":
        "nvcc compiles CUTLASS's host-side layout check for every configuration; run it when csrc/ or "
        "kernels/configs.py change",
    "tests/csrc/test_decode_wgmma_layout.py::test_every_decode_wgmma_config_pairs_gate_and_up_rows":
        "nvcc compiles the decode GEMM's layout check for every configuration; as above",
    "tests/models/test_smollm2.py::test_smollm2_all_mlps_rewritten_and_greedy_agrees_with_eager":
        "loads the real SmolLM2 weights and decodes eager and compiled (make demo runs the same)",
    "tests/models/test_decode_warmup.py::test_static_decoder_compiled_matches_eager_and_settles":
        "compiles a Qwen2 decoder's prefill and decode step; the fast case: test_static_decoder_rejects_bad_batch_...",
    "tests/diagnostics/test_diagnostics.py::test_cli_on_the_qwen25_example":
        "runs examples/diagnose_qwen25.py, a whole model, in the CLI; the CLI's fast cases: test_cli_script_in_process, ...",
    "tests/diagnostics/test_diagnostics.py::test_cli_subprocess":
        "the CLI in a fresh interpreter compiling a model; its in-process cases stay",
    "tests/compiler/test_export_and_save.py::test_aoti_package_fuses_and_runs_in_a_fresh_process":
        "an AOTInductor package compiled to C++ and loaded in a fresh interpreter; test_compiled_module_can_be_saved_and_loaded stays",
    "tests/compiler/passes/utility/test_input_forms.py::test_out_of_process_compile_mode_is_reported":
        "a fresh interpreter compiling in Inductor's subprocess mode",
    "tests/benchmarks/test_bench_model_cli.py::test_bench_model_runs_transformers_fp8_dynamic_layers":
        "bench_model.py on a transformers FP8 model, every variant compiled; the other bench_model.py cases stay",
    "tests/models/test_tensor_parallel.py::test_sharded_mlps_are_rewritten_on_every_rank_and_match_unsharded":
        "two gloo processes, each compiling its shard; test_the_plan_splits_gate_and_up_... stays",
    "tests/compiler/pre_grad/test_gated_mlp.py::test_transformers_models_train_like_stock[Qwen2Config]":
        "a whole model compiled and trained twice (ours, stock); Llama's MLP is the same form and stays",
    "tests/compiler/test_backend.py::test_modes[max-autotune-no-cudagraphs]":
        "autotunes every GEMM on the CPU; the other modes stay",
    # transformers' tiny MoE models are the slowest compiles of the CPU tests: the fast set rewrites
    # both graph forms (grouped_mm, batched_mm) and both halves of the merged weight in small modules
    # (test_the_gate_may_be_either_half_of_the_merged_output) and transformers' own routing in
    # test_transformers_sentinel_mask_before_the_gating_is_rewritten
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_transformers_experts_are_rewritten_once_per_moe_layer":
        "a whole MoE model per form",
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_geglu_experts_are_rewritten_with_their_activation":
        "a whole MoE model; the GeGLU experts' activation: test_the_op_computes_each_experts_rows",
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_batched_expert_ids_out_of_range_are_an_error":
        "a whole MoE model compiled twice; the ids' reading: test_batched_experts_take_the_ids_python_indexing_takes",
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_transformers_grouped_mm_fallback_experts_are_a_near_miss[fp16]":
        "the fp32 case stays",
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_a_second_half_gate_off_a_16_byte_boundary_is_declined[batched]":
        "the grouped case stays",
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_experts_that_receive_no_tokens":
        "a whole MoE model; experts without rows: test_the_op_computes_each_experts_rows[...0, 0, 0...]",
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_gpt_oss_clamped_interleaved_experts_are_a_near_miss":
        "a whole gpt-oss model; declined forms: test_the_rewrite_declines_odd_forms_with_a_reason",
    "tests/compiler/passes/fusion/test_swiglu_grouped.py::test_moe_rewrite_can_be_switched_off":
        "a whole MoE model compiled twice",
    "tests/integrations/test_transformers_fp8.py::test_the_swapped_model_compiled_lands_where_stock_inductor_does":
        "a transformers FP8 model compiled by both backends; test_the_swapped_model_compiles_with_the_op_in_the_graph stays",
    # one family per gated MLP form stays: llama (SwiGLU), phi3 (merged gate_up_proj), gemma (GeGLU)
    **{f"tests/models/test_model_families.py::test_family[{family}]": "the same MLP form as a family that stays"
       for family in ("mistral", "qwen2", "qwen3", "glm4 (merged gate_up_proj)", "olmo2", "granite", "cohere",
                      "qwen2_moe (shared expert)", "gemma2 (GeGLU, gelu tanh)", "gemma3 (GeGLU, gelu tanh)")},
    "tests/models/test_model_families.py::test_family[starcoder2 (GELU MLP, not gated)]":
        "a plain GELU MLP is left alone: test_pattern_pass.py::test_not_rewritten[gelu_not_gated]",
    # cross products of independent parameters (a whole FP8 model compiled per case): the cases of
    # one diagonal stay, so every value of every parameter keeps one
    **{f"tests/{test}[{params}]": "every value of its parameters keeps a case"
       for test, off_diagonal in (
           ("compiler/passes/fusion/test_swiglu_fp8.py::test_hand_written_scaled_mm_pairs_are_rewritten",
            ("True-False-2", "False-True-2", "False-False-2", "True-True-3", "True-False-3", "False-True-3")),
           ("compiler/passes/fusion/test_swiglu_fp8.py::test_torchao_float8_models_are_rewritten", ("2-tensor", "3-row")),
           ("compiler/passes/fusion/test_gated_mlp_fp8.py::test_a_torchao_mlp_becomes_one_op", ("2-tensor", "3-row")),
           ("compiler/passes/fusion/test_linear_fp8.py::test_the_down_projection_of_a_torchao_model_is_rewritten",
            ("8-2", "1-3")),
           ("compiler/passes/fusion/test_linear_fp8.py::test_the_per_tensor_down_projection_is_rewritten", ("8-2", "1-3")),
           ("compiler/passes/fusion/test_swiglu_fp8_weight.py::test_torchao_weight_only_models_are_rewritten",
            ("gelu_tanh-2", "silu-3")))
       for params in off_diagonal},
    # Triton's interpreter at K=4096 (its slowest cases); the same kernels' smaller shapes stay
    "tests/compiler/passes/fusion/test_linear_fp8.py::test_the_decode_kernel_matches_the_reference[True-16-64-4096]":
        "the interpreter at K=4096; [True-5-200-640] stays",
    "tests/compiler/passes/fusion/test_linear_fp8.py::test_the_decode_kernel_matches_the_reference[False-16-64-4096]":
        "the interpreter at K=4096; [False-5-200-640] stays",
    "tests/compiler/passes/fusion/test_linear_fp8.py::test_the_decode_kernel_quantizes_per_tensor[16-64-4096]":
        "the interpreter at K=4096; [5-200-640] stays",
    "tests/compiler/passes/fusion/test_gated_mlp_fp8.py::test_the_down_kernel_takes_the_row_maxima_from_parts[16-64-4096-130]":
        "the interpreter at K=4096; the smaller shapes stay",
    "tests/compiler/pre_grad/test_gated_mlp.py::test_transformers_models_train_like_stock[LlamaConfig]":
        "a tiny transformers model trained, the slowest kind of case here; the plain MLP forms cover the rewrite, and test-all and the floor step run the models",
    "tests/compiler/pre_grad/test_gated_mlp.py::test_transformers_models_train_like_stock[Phi3Config]":
        "as the Llama case: the merged gate_up form is covered by the plain module tests",
    "tests/compiler/pre_grad/test_gated_mlp.py::test_gated_mlps_train_like_stock[merged gate_up_proj]":
        "the merged form with biases stays",
    "tests/compiler/pre_grad/test_gated_mlp.py::test_low_precision_trains_like_stock[dtype1]":
        "bf16 stays (fp16 takes the same path)",
    "tests/compiler/pre_grad/test_gated_mlp.py::test_fsdp2_module_trains_like_stock":
        "a gloo process group and FSDP2's wrapping; DDP's no_sync case stays",
}


def _matches(nodeid: str, key: str) -> bool:
    return nodeid == key or (nodeid.startswith(key) and (key[-1] in "[-" or nodeid[len(key)] == "["))


def slow_reason(nodeid: str) -> str:
    return next((why for key, why in SLOW.items() if _matches(nodeid, key)), "")


@pytest.hookimpl(tryfirst=True)   # before -k and -m deselect, so every collected test is seen
def pytest_collection_modifyitems(config, items):
    has_cuda = torch.cuda.is_available()
    hopper = has_cuda and torch.cuda.get_device_capability() == (9, 0)
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "hopper" in item.keywords and not hopper:
            item.add_marker(pytest.mark.skip(reason="needs an sm_90 (Hopper) GPU"))
        if slow_reason(item.nodeid):
            item.add_marker(pytest.mark.slow)
    _check_slow_names(config, items)


def _check_slow_names(config, items) -> None:
    """Every name in SLOW must name a file that exists, and match a test wherever its whole file was
    collected (a moved test file would otherwise leave its slow cases in the fast set unseen)."""
    for key in SLOW:
        if not (config.rootpath / key.split("::")[0]).is_file():
            raise pytest.UsageError(f"tests/conftest.py SLOW names {key!r}, whose file does not exist: moved? update SLOW")
    if any("::" in str(arg) for arg in config.args):
        return   # single tests asked for: their files' other tests were not collected
    files = {item.nodeid.split("::")[0] for item in items}
    for key in SLOW:
        if key.split("::")[0] in files and not any(_matches(item.nodeid, key) for item in items):
            raise pytest.UsageError(f"tests/conftest.py SLOW names {key!r}, which matches no test: renamed? update SLOW")


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    @property
    def text(self):
        return "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in self.records)


@pytest.fixture
def isw_logs():
    """Records of the `inductor_swiglu` loggers (INFO and up) during the test."""
    logger = logging.getLogger("inductor_swiglu")
    handler = _Capture()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


@pytest.fixture
def torchao_float8(monkeypatch):
    """torchao's float8 configs, built on the CPU: its hardware check asks for an sm_89+ GPU."""
    pytest.importorskip("torchao")
    import torchao.float8.inference as inference
    import torchao.quantization.quant_api as quant_api
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor, quantize_

    monkeypatch.setattr(inference, "_check_hardware_support", lambda *a, **k: None)
    monkeypatch.setattr(quant_api, "_check_hardware_support", lambda *a, **k: None)
    return quantize_, Float8DynamicActivationFloat8WeightConfig, {"row": PerRow(), "tensor": PerTensor()}


@pytest.fixture
def torchao_float8_weight_only(torchao_float8):
    """torchao's quantize_ and its weight-only float8 config, built on the CPU (same hardware check)."""
    from torchao.quantization import Float8WeightOnlyConfig

    return torchao_float8[0], Float8WeightOnlyConfig
