"""Entry points for models whose gated MLP Inductor cannot see: the FP8 checkpoints transformers
runs through its own opaque kernels (``transformers_fp8``)."""
