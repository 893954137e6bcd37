"""depyf (decompiled Dynamo bytecode, graphs, kernels), best-effort.

depyf is optional and unmaintained since 0.20.0 (Oct 2025).  Three things go
wrong with it today, and none of them may cost the user their run or the rest of
the dump:

* torch 2.13 calls ``PyCodeCache.load_by_key_path(key, path, set_sys_modules=...)``
  (autotuning and Triton benchmarking paths).  depyf swaps that method for a
  function with the fixed signature ``(key, path, linemap=None, attrs=None)``, so
  the compile dies with ``TypeError: ... unexpected keyword argument
  'set_sys_modules'``.  We install our own replacement that takes ``**kwargs``
  and forwards them (what vLLM's ``depyf_compat.py`` does), and that never lets a
  failure to write the dump copy break the load.
* Its decompiler is not tested on Python >= 3.12: a bytecode hook that raises
  would fail the compile, so the hook is wrapped and its failures are counted.
* ``prepare_debug``'s exit decompiles every compiled function; an error there
  is recorded instead of propagating out of the user's ``with`` block.

``DepyfRun.status`` says what happened, for the summary.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import traceback
import warnings
from dataclasses import dataclass, field


@dataclass
class DepyfStatus:
    enabled: bool = False                 # asked for
    available: bool = False               # importable
    version: str = ""
    ok: bool = False                      # prepare_debug entered and exited cleanly
    shim: str = ""                        # what the compatibility shim did, in words
    errors: list[str] = field(default_factory=list)   # what failed and why, in order, each once
    files: int = 0
    _repeats: dict = field(default_factory=dict, repr=False)

    def add_error(self, message: str) -> None:
        self._repeats[message] = self._repeats.get(message, 0) + 1
        self.errors = [m if n == 1 else f"{m} (x{n})" for m, n in self._repeats.items()]

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


def _short(e: BaseException) -> str:
    msg = str(e).strip()
    text = msg if msg.startswith(type(e).__name__) else f"{type(e).__name__}: {msg}"
    return text if len(text) < 400 else text[:400] + " ..."


def _make_load_by_key_path(status: DepyfStatus):
    """depyf's patched_load_by_key_path, accepting whatever keywords torch passes."""

    def patched_load_by_key_path(key, path, linemap=None, attrs=None, **kwargs):
        from depyf.explain.global_variables import data

        unpatched = data["unpatched_load_by_key_path"]
        try:
            from depyf.explain.utils import get_current_compiled_fn_name, write_code_to_file_template

            with open(path) as f:
                src = f.read()
            try:
                name = get_current_compiled_fn_name()
            except Exception:  # autotune benchmark modules are loaded outside any compiled fn
                name = "inductor_module"
            # depyf loads the copy so that tracebacks and breakpoints point into the dump.
            path = write_code_to_file_template(src, os.path.join(data["dump_src_dir"], name + ".kernel_%s.py"))
        except Exception as e:
            if len(status.errors) < 20:
                status.add_error(f"could not copy generated code {os.path.basename(str(path))}: {_short(e)}")
        return unpatched(key, path, linemap, attrs, **kwargs)

    return patched_load_by_key_path


def _wrap_bytecode_hook(status: DepyfStatus, original_call, last_error: list):
    @functools.wraps(original_call)
    def __call__(self, code, new_code):
        last_error.clear()
        try:
            # depyf prints a disassembly and a traceback for each failure: the summary says it once.
            with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
                warnings.simplefilter("ignore")
                result = original_call(self, code, new_code)
        except Exception as e:
            status.add_error(f"decompiling {code.co_name} failed: {_short(e)}")
            return None  # Dynamo keeps its own bytecode
        if result is None:
            why = last_error[0] if last_error else "no reason given"
            status.add_error(f"decompiling {code.co_name} failed ({why}); Dynamo's bytecode was used")
        return result

    return __call__


def _wrap_decompile(original, last_error: list):
    # depyf catches its own DecompilationError inside the hook; this keeps the reason.
    def decompile_and_compile_like(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except Exception as e:
            last_error[:] = [_short(e)]
            raise

    return staticmethod(decompile_and_compile_like)


_active: list = []   # depyf patches process-wide state: one run at a time


class DepyfRun:
    """``depyf.prepare_debug(dump_dir)`` with the shims above; enter() and exit() never raise."""

    def __init__(self, dump_dir: str, enabled: bool = True) -> None:
        self.dump_dir = dump_dir
        self.status = DepyfStatus(enabled=enabled)
        self._cm = None
        self._restore: list = []

    def enter(self) -> None:
        if not self.status.enabled:
            return
        if _active:
            self.status.add_error("depyf is already recording for an enclosing diagnostics session")
            return
        try:
            import depyf
            from depyf.explain import enable_debugging
        except Exception as e:
            self.status.add_error(
                f"depyf is not installed ({_short(e)}); install it with pip install 'inductor_swiglu[diagnostics]'"
            )
            return
        self.status.available = True
        self.status.version = getattr(depyf, "__version__", "?")
        if not hasattr(enable_debugging, "prepare_debug"):
            self.status.add_error("depyf has no prepare_debug (an API change?)")
            return
        try:
            self._install_shims(enable_debugging)
            os.makedirs(self.dump_dir, exist_ok=True)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*You are trying to debug `torch.compile`.*")
                self._cm = enable_debugging.prepare_debug(self.dump_dir)
                self._cm.__enter__()
            _active.append(self)
        except Exception as e:
            self._cm = None
            self._uninstall_shims()
            self.status.add_error(f"depyf.prepare_debug failed to start: {_short(e)}")

    def _install_shims(self, enable_debugging) -> None:
        import inspect

        from torch._inductor.codecache import PyCodeCache

        # prepare_debug reads these module globals when it patches torch, so they are
        # replaced before it runs and put back after it exits.
        old = enable_debugging.patched_load_by_key_path
        enable_debugging.patched_load_by_key_path = _make_load_by_key_path(self.status)
        self._restore.append((enable_debugging, "patched_load_by_key_path", old))
        from depyf.decompiler import Decompiler

        last_error: list = []
        hook_cls = enable_debugging.DebuggableHook
        old_call = hook_cls.__call__
        hook_cls.__call__ = _wrap_bytecode_hook(self.status, old_call, last_error)
        self._restore.append((hook_cls, "__call__", old_call))
        old_dec = Decompiler.__dict__["decompile_and_compile_like"]
        Decompiler.decompile_and_compile_like = _wrap_decompile(Decompiler.decompile_and_compile_like, last_error)
        self._restore.append((Decompiler, "decompile_and_compile_like", old_dec))
        params = inspect.signature(PyCodeCache.load_by_key_path).parameters
        new_kw = [p for p in params if p not in ("key", "path", "linemap", "attrs")]
        self.status.shim = (
            f"load_by_key_path accepts torch's extra keyword(s) {new_kw} (depyf 0.20 does not)"
            if new_kw else "load_by_key_path shim installed (not needed by this torch)"
        ) + "; decompilation errors are recorded instead of failing the compile"

    def _uninstall_shims(self) -> None:
        while self._restore:
            owner, name, value = self._restore.pop()
            setattr(owner, name, value)

    def exit(self) -> None:
        if self._cm is None:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._cm.__exit__(None, None, None)
            self.status.ok = not self.status.errors
        except Exception as e:
            self.status.add_error(
                f"depyf failed while writing its dump: {_short(e)}\n{traceback.format_exc(limit=4)}"
            )
            try:
                from depyf.explain.global_variables import data

                data["is_inside_prepare_debug"] = False
            except Exception:
                pass
        finally:
            self._cm = None
            self._uninstall_shims()
            if self in _active:
                _active.remove(self)
        self._scan_files()

    def _scan_files(self) -> None:
        # depyf writes a placeholder body instead of raising when it cannot decompile a
        # function (most bytecode of Python >= 3.12): count those as failures too.
        failed = []
        try:
            for root, _, names in os.walk(self.dump_dir):
                for name in names:
                    self.status.files += 1
                    if name.startswith("full_code_for_"):
                        with open(os.path.join(root, name), errors="replace") as f:
                            if "'Failed to decompile.'" in f.read():
                                failed.append(name)
        except OSError:
            return
        if failed:
            self.status.ok = False
            self.status.add_error(
                f"depyf could not decompile some functions (see {', '.join(sorted(failed)[:3])}); "
                "its decompiler does not support all bytecode of this Python"
            )
