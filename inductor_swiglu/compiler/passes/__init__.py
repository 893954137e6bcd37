"""The post-grad passes, one module each, each a ``GraphPass`` named for what it does.

``pass_manager.PostGradPassManager.configure`` decides which run and in what order: first the
normalizations that bring every spelling of a gated MLP to the form the patterns match
(unfreeze_weights, unpad_projections, scaled_mm_v2_as_scaled_mm, merge_equal_copies,
split_merged_projections, unshare_input_reshapes, vector_input_as_reshapes), then the rewrites
(fp8_weight_only_fusion and its down projection's before swiglu_fusion; its FP8 twin
scaled_swiglu_fusion and its down projection's, scaled_down_fusion, which reads h as
fold_product_reshapes leaves it, and whose pairs merge_fp8_mlp makes one op), then what depends on its result (use_native_op), the read-only report of what was
left alone (report_near_misses), and last restore_scaled_mm_v2, which gives back the spelling of
the scaled GEMMs no rewrite took.
"""
