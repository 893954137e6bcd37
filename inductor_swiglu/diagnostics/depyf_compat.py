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

import functools
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
    errors: list[str] = field(default_factory=list)   # what failed and why, in order
    files: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip()
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
                status.errors.append(f"could not copy generated code {os.path.basename(str(path))}: {_short(e)}")
        return unpatched(key, path, linemap, attrs, **kwargs)

    return patched_load_by_key_path


def _wrap_bytecode_hook(status: DepyfStatus, original_call):
    @functools.wraps(original_call)
    def __call__(self, code, new_code):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = original_call(self, code, new_code)
        except Exception as e:
            status.errors.append(f"decompiling {code.co_name} failed: {_short(e)}")
            return None  # Dynamo keeps its own bytecode
        if result is None:
            # depyf reports a DecompilationError as a warning and gives up on this code object.
            first = next((str(w.message).splitlines()[0] for w in caught), "no reason given")
            status.errors.append(f"decompiling {code.co_name} failed: {first}")
        return result

    return __call__


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
        try:
            import depyf
            from depyf.explain import enable_debugging
        except Exception as e:
            self.status.errors.append(
                f"depyf is not installed ({_short(e)}); install it with pip install 'inductor_swiglu[diagnostics]'"
            )
            return
        self.status.available = True
        self.status.version = getattr(depyf, "__version__", "?")
        if not hasattr(enable_debugging, "prepare_debug"):
            self.status.errors.append("depyf has no prepare_debug (an API change?)")
            return
        try:
            self._install_shims(enable_debugging)
            os.makedirs(self.dump_dir, exist_ok=True)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*You are trying to debug `torch.compile`.*")
                self._cm = enable_debugging.prepare_debug(self.dump_dir)
                self._cm.__enter__()
        except Exception as e:
            self._cm = None
            self._uninstall_shims()
            self.status.errors.append(f"depyf.prepare_debug failed to start: {_short(e)}")

    def _install_shims(self, enable_debugging) -> None:
        import inspect

        from torch._inductor.codecache import PyCodeCache

        # prepare_debug reads these module globals when it patches torch, so they are
        # replaced before it runs and put back after it exits.
        old = enable_debugging.patched_load_by_key_path
        enable_debugging.patched_load_by_key_path = _make_load_by_key_path(self.status)
        self._restore.append((enable_debugging, "patched_load_by_key_path", old))
        hook_cls = enable_debugging.DebuggableHook
        old_call = hook_cls.__call__
        hook_cls.__call__ = _wrap_bytecode_hook(self.status, old_call)
        self._restore.append((hook_cls, "__call__", old_call))
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
            self.status.errors.append(
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
        try:
            self.status.files = sum(len(f) for _, _, f in os.walk(self.dump_dir))
        except OSError:
            pass
