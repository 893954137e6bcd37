"""One module per form for ``benchmarks/sweep.py --form <form>``: the form's inputs, candidates,
references and numerics rule (``measure``), its progress line and report (``describe``,
``markdown``), and how its rows become table entries (``install``).  The point loop, resume,
re-choosing, compaction and the timing itself are the driver's (``sweep.py``, ``timing.py``)."""

FORMS = ("swiglu", "swiglu_fp8", "swiglu_fp8_block", "swiglu_grouped", "swiglu_fp8_weight", "linear_fp8")
