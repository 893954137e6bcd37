"""The block-scaled form's unfused path: which shapes it may hand to cuBLAS."""
import pytest

from inductor_swiglu.ops import swiglu_fp8_block as op


@pytest.mark.parametrize("N,K,needs", [
    (4864, 4096, ""),
    (4864, 896, "K=896"),        # K blocks not a multiple of 4
    (136, 4096, "N=136"),        # cuBLAS asks N % 16 == 0; this shape once raised on the GPU
    (144, 512, ""),
])
def test_cublas_takes_only_the_shapes_it_accepts(N, K, needs):
    why = op.cublas_shape_reason(N, K)
    assert (needs in why) if needs else why == "", why
