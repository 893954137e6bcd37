"""The post-grad passes, one module each, each a ``GraphPass`` named for what it does, in two folders
(vLLM's ``compilation/passes/``):

* ``fusion/``: the rewrites into the package's ops, one file per form (``swiglu``, ``swiglu_fp8``,
  ``linear_fp8``, ``swiglu_fp8_weight``, ``linear_fp8_weight``, ``swiglu_grouped``, and
  ``gated_mlp_fp8``, which merges an FP8 MLP's two rewrites into one op).  Each checks that a match
  is exact (the checks they share: ``fusion/checks.py``; no pass imports another) and asks dispatch
  whether it is worth it (``dispatch.worth_it``).
* ``utility/``: the normalizations that bring every spelling of a gated MLP to the form the patterns
  match, and the rest.

``pass_manager.PostGradPassManager.configure`` decides which run and in what order: first the
normalizations (unfreeze_weights, unpad_projections, scaled_mm_v2_as_scaled_mm, merge_equal_copies,
split_merged_projections, unshare_input_reshapes, vector_input_as_reshapes), then the rewrites
(the weight-only FP8 MLP and its down projection before the bf16 swiglu; its FP8 twin swiglu_fp8 and
its down projection's, linear_fp8, which reads h as fold_product_reshapes leaves it, and whose pairs
gated_mlp_fp8 makes one op; swiglu_grouped), then what depends on their result (use_native_op; and
lower_gated_mlp, which turns the training form's ops, rewritten before AOTAutograd, into the fused GEMMs
they run), the
read-only report of what was left alone (report_near_misses), and last restore_scaled_mm_v2, which
gives back the spelling of the scaled GEMMs no rewrite took.
"""
