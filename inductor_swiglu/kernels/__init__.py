"""The kernels: the CUDA kernels' configuration tables (``configs``), their build (``build``), the
loader of the built library (``library``), the ids Python and the C ABI share (``vocabulary``), the
gate activations (``activations``) and the Triton kernels (``triton/``).  ``configs``, ``vocabulary``
and ``build`` import no torch: ``setup.py`` runs them before torch is importable.  Nothing here
imports dispatch/, ops/ or compiler/."""
