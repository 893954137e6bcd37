"""The error metrics that the GPU tests and benchmarks assert on."""

import torch

from inductor_swiglu.testing.numerics import error_stats, reference_fp64


def test_one_percent_error_on_a_normal_value_counts():
    ref = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    out = torch.tensor([1.0, 2.0, 3.0, 4.1], dtype=torch.float16)   # 2.5% off
    s = error_stats(out, ref)
    assert s["frac_over_1pct"] == 0.25 and s["frac_over_1pct_resolved"] == 0.25 and s["unresolved_elements"] == 0


def test_fp16_subnormal_reference_is_not_resolvable():
    # 1e-6 is subnormal in fp16 (spacing 6e-8): the nearest fp16 value is 1.5% off by itself
    ref = torch.tensor([1.0, 1.0e-6 + 2.9e-8], dtype=torch.float64)
    out = ref.to(torch.float16)
    s = error_stats(out, ref)
    assert s["frac_over_1pct"] == 0.5              # the strict metric still sees it
    assert s["frac_over_1pct_resolved"] == 0.0 and s["unresolved_elements"] == 1
    # bf16 has fp32's exponent range: the same value is a normal number there
    assert error_stats(ref.to(torch.bfloat16), ref)["unresolved_elements"] == 0


def test_reference_noise_marks_cancellation_unresolved():
    x = torch.tensor([[1.0, -1.0]], dtype=torch.float32)
    w = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float32)   # gate row 0 cancels exactly
    ref = reference_fp64(x, w, w, with_noise=True)
    out = torch.full((1, 2), 1e-3, dtype=torch.float32)
    s = error_stats(out, ref)
    assert s["unresolved_elements"] == 1    # the exact-zero element is at noise level
