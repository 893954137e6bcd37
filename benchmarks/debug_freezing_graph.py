"""Print the post-grad graph our pass receives under freezing=True on CUDA (debug aid)."""
import sys

import torch

sys.path.insert(0, "tests")
from mlp_models import GatedMLP  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu.compiler.records import RECORDS  # noqa: E402

RECORDS.capture_text = 1
torch._inductor.config.force_disable_caches = True
for shape in ((16, 896), (2, 8, 896)):
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    m = GatedMLP(896, 4864).to("cuda", torch.bfloat16).eval()
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        torch.compile(m, backend="inductor_swiglu")(torch.randn(*shape, device="cuda", dtype=torch.bfloat16))
    for g in RECORDS.graphs:
        print("=== BEFORE", shape, "\n", g.graph_before, "\n=== AFTER\n", g.graph_after, "\nrewrites", g.rewrites, "near", g.near_misses, "err", g.error)
