"""What the transformers installed can build, for tests that need more than its presence: the
package declares transformers >= 4.57 (``demo`` extra), and .ci/transformers_floor.sh runs the tests
marked ``transformers`` on that floor, where some of what 5.x writes does not exist yet."""

import pytest


def experts_implementation_reason() -> str | None:
    """Why this transformers has no experts implementations to choose (None: it has).  Without them
    (4.x) a MoE block loops over per-expert MLP modules: there is no grouped_mm or batched_mm
    experts graph for the routed-expert rewrite, and the dense rewrite takes each expert's MLP."""
    transformers = pytest.importorskip("transformers")   # a demo extra, not a test dependency
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS  # noqa: F401
    except ImportError:
        return (f"transformers {transformers.__version__} has no experts implementations (transformers.integrations.moe): "
                "its MoE blocks loop over per-expert MLP modules, not the grouped_mm / batched_mm experts this test compiles")
    return None


def skip_without_experts_implementations() -> None:
    if why := experts_implementation_reason():
        pytest.skip(why)
