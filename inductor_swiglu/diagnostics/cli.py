"""``python -m inductor_swiglu diagnose``: run a script or a function under a diagnostics session.

    python -m inductor_swiglu diagnose [options] script.py [args ...]
    python -m inductor_swiglu diagnose [options] package.module:function [args ...]
    python -m inductor_swiglu diagnose [options] package.module [args ...]

A script runs as ``python script.py args`` would (``__name__ == "__main__"``,
``sys.argv``, its folder first on ``sys.path``); ``module:function`` imports the
module and calls the function with no arguments (``sys.argv`` holds the args);
a bare module runs as ``python -m module``.  The dump is written even when the
target raises or exits non-zero; the exit code is the target's.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import runpy
import sys
import traceback
from pathlib import Path

from .session import Session

_USAGE = "python -m inductor_swiglu diagnose [options] (script.py | module:function | module) [args ...]"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m inductor_swiglu diagnose", usage=_USAGE, description=(
        "Run a target under torch.compile diagnostics and write a dump that explains what was compiled, "
        "why it recompiled, and where the SwiGLU pass fired or did not."))
    p.add_argument("--out", "-o", default="inductor_swiglu_dump", help="dump directory (default: %(default)s)")
    p.add_argument("--no-depyf", action="store_true", help="do not run depyf")
    p.add_argument("--keep-caches", action="store_true",
                   help="leave Inductor's caches on (graphs from a cache are not seen by the pass)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not print summary.md at the end")
    p.add_argument("target", help="script.py, module:function, or module")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the target")
    return p


class _Target:
    """What to run, and how to present it to itself (argv, sys.path)."""

    def __init__(self, spec: str, args: list[str]) -> None:
        self.spec, self.args = spec, args
        self.is_script = spec.endswith(".py") or (os.path.exists(spec) and ":" not in spec)
        self._globals = None

    def check(self) -> str:
        """'' if the target can be run, else what is wrong, in words (before any dump is started)."""
        if self.is_script:
            return "" if Path(self.spec).is_file() else f"no such script: {self.spec}"
        module, _, func = self.spec.partition(":")
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:
            found, err = None, f" ({e})"
        else:
            err = ""
        if found is None:
            return f"no module named {module!r}{err} (give a script path, package.module, or package.module:function)"
        if func:
            try:
                obj = importlib.import_module(module)
            except Exception as e:  # noqa: BLE001  (the user's module failed to import: say how)
                return f"importing {module!r} failed: {type(e).__name__}: {e}"
            for part in func.split("."):
                if not hasattr(obj, part):
                    return f"{module!r} has no attribute {func!r}"
                obj = getattr(obj, part)
            if not callable(obj):
                return f"{self.spec} is not callable"
        return ""

    def describe(self) -> str:
        head = f"python {self.spec}" if self.is_script else self.spec
        return " ".join([head, *self.args])

    def run(self) -> int:
        if self.is_script:
            path = Path(self.spec).resolve()
            if not path.exists():
                raise FileNotFoundError(f"no such script: {self.spec}")
            sys.argv = [str(path), *self.args]
            sys.path.insert(0, str(path.parent))
            # Kept until the dump is written: the script's models own Dynamo's cache
            # entries, and with them the guards the dump prints.
            self._globals = runpy.run_path(str(path), run_name="__main__")
            return 0
        module, _, func = self.spec.partition(":")
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        sys.argv = [self.spec, *self.args]
        if not func:
            self._globals = runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
        obj = importlib.import_module(module)
        for part in func.split("."):
            obj = getattr(obj, part)
        result = obj()
        self._globals = result
        return result if isinstance(result, int) and not isinstance(result, bool) else 0


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    args = list(ns.args)
    if args[:1] == ["--"]:
        args = args[1:]
    target = _Target(ns.target, args)
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    problem = target.check()
    if problem:
        sys.path[:] = saved_path
        print(f"inductor_swiglu diagnose: {problem}; no dump written", file=sys.stderr)
        return 2
    session = Session(ns.out, depyf=not ns.no_depyf, disable_caches=not ns.keep_caches, target=target.describe())
    rc = 0
    try:
        with session:
            try:
                rc = target.run()
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):   # sys.exit("message"): Python prints it; so do we, -q or not
                    print(e.code, file=sys.stderr)
                if rc:
                    raise
    except SystemExit:
        pass
    except Exception:
        traceback.print_exc()
        rc = 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if not ns.quiet:
        summary_md = Path(session.dump_dir) / "summary.md"
        if summary_md.exists():
            print("\n" + summary_md.read_text(), end="")
    print(f"\ndiagnostics dump: {session.dump_dir} (start with summary.md)", file=sys.stderr)
    return rc
