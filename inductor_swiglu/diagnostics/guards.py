"""Guards in words: the installed guard tree of each compiled frame, what it
specializes on, and what kind of guard failed when a frame recompiled.

The guard tree comes from ``torch._dynamo.eval_frame._debug_get_cache_entry_list``
(private; depyf uses it too), so every read is wrapped and a failure becomes a
line in the dump rather than an exception.  Failure texts are Dynamo's own
(``tensor 'x' size mismatch at index 0. expected 4, actual 6``, ``scale == 2``,
``len(xs) == 1``, ``2 <= x.size()[0]``, ``___check_obj_id(...)``); ``classify``
turns one into a ``Cause`` that the summary can give advice for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_GUARD_LINE = re.compile(r"\+- ([A-Z_]+): (.*)$")


def cache_entry_guards(code, skip: frozenset | set = frozenset()) -> tuple[dict[str, str], str]:
    """{compile_id: guard tree text} for the entries Dynamo still holds for `code`
    (except compile ids in `skip`: printing a large tree is not free), and an error ('' if none)."""
    if code is None:
        return {}, "the code object was not recorded"
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        entries = _debug_get_cache_entry_list(code)
    except Exception as e:
        return {}, f"torch._dynamo.eval_frame._debug_get_cache_entry_list failed: {type(e).__name__}: {e}"
    out: dict[str, str] = {}
    for e in entries:
        try:
            cid = str(getattr(e, "compile_id", "?"))
            if cid in skip:
                continue
            gm = getattr(e, "guard_manager", None)
            out[cid] = str(gm).strip() if gm is not None else "(no guard manager on this cache entry)"
        except Exception as err:
            out[f"?{len(out)}"] = f"(could not print the guards: {type(err).__name__}: {err})"
    return out, ""


def _strip_comment(expr: str) -> str:
    # Dynamo appends "  # user code  # file:line in fn" to each guard.
    return expr.split("  #", 1)[0].strip()


def _simplify_source(expr: str) -> str:
    # L['x'] -> x, G['w'] -> w, self._modules['mlp']._parameters['weight'] -> self.mlp.weight:
    # the names users wrote.
    expr = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", expr)
    expr = re.sub(r"^kwargs\['(\w+)'\]", r"\1", expr)  # passed as input_ids=...: the user knows it as input_ids
    return re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", expr)


def guard_kinds(tree: str) -> dict[str, int]:
    """How many guards of each kind the tree holds (TENSOR_MATCH, ID_MATCH, ...)."""
    kinds: dict[str, int] = {}
    for line in tree.splitlines():
        m = _GUARD_LINE.search(line)
        if m:
            kinds[m.group(1)] = kinds.get(m.group(1), 0) + 1
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))


_TENSOR_MATCH = re.compile(
    r"check_tensor\((?P<src>[^,]+), [^,]+, DispatchKeySet\((?P<keys>[^)]*)\), (?P<dtype>[\w.]+), "
    r".*?requires_grad=(?P<rg>\w+), size=(?P<size>\[[^\]]*\]), stride=(?P<stride>\[[^\]]*\])"
)


def specializations(tree: str) -> list[str]:
    """What this compiled frame is specialized on, one short line each: tensor
    sizes (None = dynamic), Python values, lengths, size relations.  Parameters
    and buffers (fixed by the model) are counted on one line, not listed."""
    out: list[str] = []
    weights = 0
    for line in tree.splitlines():
        m = _GUARD_LINE.search(line)
        if not m:
            continue
        kind, expr = m.group(1), _strip_comment(m.group(2))
        if kind == "TENSOR_MATCH":
            t = _TENSOR_MATCH.search(expr)
            if t and re.search(r"_(?:parameters|buffers)\[", t.group("src")):
                weights += 1
            elif t:
                device = "cuda" if "CUDA" in t.group("keys") else "cpu" if "CPU" in t.group("keys") else t.group("keys")
                out.append(
                    f"tensor {_simplify_source(t.group('src'))}: size {t.group('size')} stride {t.group('stride')} "
                    f"{t.group('dtype').replace('torch.', '')} {device}"
                    + (" requires_grad" if t.group("rg") == "True" else "")
                )
        elif kind in ("EQUALS_MATCH", "LENGTH_CHECK", "DICT_LENGTH", "TUPLE_ITERATOR_LEN"):
            out.append(_simplify_source(expr))
        elif (kind == "LAMBDA_GUARD" and ".size()" in expr) or kind == "SYMBOLIC_SHAPE_GUARD":
            out.append(_simplify_source(expr))
    if weights:
        out.append(f"{weights} parameter/buffer tensor(s): their shapes, dtypes and devices")
    return out


@dataclass(frozen=True)
class Cause:
    kind: str       # size, stride, dtype, rank, requires_grad, dispatch, value, length, identity, type,
                    # global_state, dynamic_size, other
    subject: str    # the variable, as the user wrote it ("x", "scale", "self.mlp")
    detail: str     # index, expected/actual, the failed expression


_TENSOR_FAIL = re.compile(r"tensor '(?P<name>.+?)' (?P<what>[\w ]+?) mismatch(?: at index (?P<idx>\d+))?\.? ?(?P<rest>.*)")


def _head(reason: str) -> str:
    """'0/3: tensor 'x' ...  # comment' -> "tensor 'x' ..." (first line, no compile id, no comment)."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    first = re.sub(r"^\S+/\S+: ", "", first, count=1)
    return _strip_comment(first)


def failed_guard(reason: str) -> str:
    """The failed guard alone, in the user's names: "0/0: L['scale'] == 2  # ..." -> "scale == 2"."""
    return _simplify_source(_head(reason))


def classify(reason: str) -> Cause:
    text = _head(reason)
    m = _TENSOR_FAIL.match(text)
    if m:
        what = m.group("what").strip()
        kind = {
            "size": "size", "stride": "stride", "dtype": "dtype", "rank": "rank",
            "requires_grad": "requires_grad", "dispatch key set": "dispatch",
        }.get(what, "tensor_" + what.replace(" ", "_"))
        detail = (f"index {m.group('idx')}: " if m.group("idx") else "") + m.group("rest").strip()
        return Cause(kind, _simplify_source(m.group("name")), detail.strip())
    if "___check_global_state" in text or text.startswith("GLOBAL_STATE"):
        return Cause("global_state", "", text)
    if "___check_obj_id" in text:
        src = re.search(r"___check_obj_id\(([^,]+),", text)
        return Cause("identity", _simplify_source(src.group(1)) if src else "", text)
    if "___check_type_id" in text:
        src = re.search(r"___check_type_id\(([^,]+),", text)
        return Cause("type", _simplify_source(src.group(1)) if src else "", text)
    size = re.search(r"(\w[\w.\[\]']*)\.size\(\)\[(\d+)\]", text)
    if size:
        return Cause("dynamic_size", _simplify_source(size.group(1)), f"dim {size.group(2)}: {_simplify_source(text)}")
    length = re.match(r"len\((.+)\) == (\d+)$", _simplify_source(text))
    if length:
        return Cause("length", length.group(1), text)
    value = re.match(r"(.+?) == (.+)$", _simplify_source(text))
    if value and not value.group(1).startswith(("hasattr(", "___")):
        return Cause("value", value.group(1).strip(), value.group(2).strip())
    return Cause("other", "", text)
