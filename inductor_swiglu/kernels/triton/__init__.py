"""The Triton kernels, one module per form (``swiglu``, ``swiglu_fp8``, ``swiglu_grouped``,
``linear_fp8``), the FP8 block quantization they share (``quantize_fp8``) and their helpers
(``common``).  Triton is optional: every module imports without it."""
