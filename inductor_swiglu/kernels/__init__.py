"""The CUDA kernels: their configuration tables (``configs``), their build (``build``) and the
loader of the built library (``library``).  ``configs`` and ``build`` import no torch:
``setup.py`` runs them before torch is importable."""
