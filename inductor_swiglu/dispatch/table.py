"""The dispatch table format: which implementation serves each (dtype, activation, K, N, M bucket).

Torch-free on purpose: ``kernels.build`` reads the shipped tables (before torch is importable)
to compile only the configurations they name.  One JSON file per device kind under
``tables/`` (``h200.json``); ``benchmarks/sweep_dispatch.py`` (dense), ``sweep_scaled.py`` (FP8) and
``sweep_moe.py`` (routed experts) measure and install their keys' rows, each rewriting only its
own rows and its own clause of the table's method (``with_rows``, ``method_with``).

A table holds measured entries under keys ``"<dtype>/<activation>"`` and a ``serves`` map that
says which keys the table answers and with whose rows: a key may be served by its own rows or by
another key's (GeGLU by SiLU's rows: the epilogue's activation is a small share of the time).
Keys of different element types never share rows unless the table says so, so an fp8 model
never runs a bf16 plan.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = 2
TABLES_DIR = Path(__file__).resolve().parent / "tables"

# The implementations a table may name (the C ABI's ids are in kernels/library.py; scaled_triton is
# the FP8 Triton kernel, kernels/triton/swiglu_fp8.py, which the kernel build does not compile, as
# it does not grouped_triton).
IMPLS = ("unfused", "dual_gemm", "interleaved_gemm", "decode_gemm", "scaled_triton", "scaled_gemm", "grouped_triton",
         "gated_mlp")
# Problem forms besides the dense MLP (Key.form); grouped_triton is the routed experts' Triton kernel
# (kernels/triton/swiglu_grouped.py).  "train": a whole gated MLP's forward and backward, where
# "gated_mlp" is the training form's op (ops/gated_mlp.py, its config the candidate measured) and
# "unfused" what stock compiles: the pass rewrites a training graph only where the op was faster.
GROUPED_FORM = "grouped"
TRAIN_FORM = "train"
FORMS = (GROUPED_FORM, TRAIN_FORM)

# (lowest M, highest M, the M the sweep measures for the bucket).  Decode sizes get fine buckets
# (the fastest kernel changes with each token block of 8); prefill sizes coarse ones.
M_BUCKETS: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (2, 8, 8), (9, 16, 16), (17, 32, 32), (33, 64, 64), (65, 256, 128),
    (257, 1024, 512), (1025, 4096, 2048), (4097, 1 << 62, 8192),
)


def bucket_of(M: int) -> tuple[int, int, int]:
    """The bucket (lo, hi, representative M) that holds M (M >= 1)."""
    for b in M_BUCKETS:
        if b[0] <= M <= b[1]:
            return b
    raise ValueError(f"M={M} is in no bucket (M >= 1)")


@dataclass(frozen=True)
class Key:
    """What must match for two problems to share a plan: the element type (with its scaling, for
    quantized types), the gate's activation, and the problem's form: "" for a dense MLP, "grouped"
    for routed experts (``[S, K]`` rows sorted by expert against ``[E, K, 2N]`` weights, M = S)."""

    dtype: str         # "bfloat16", "float16", "float32", ...
    activation: str    # "silu", "gelu_tanh", "gelu"
    form: str = ""     # "" (dense) or one of FORMS

    @property
    def text(self) -> str:
        return f"{self.form}/{self.dtype}/{self.activation}" if self.form else f"{self.dtype}/{self.activation}"

    @classmethod
    def parse(cls, text: str) -> Key:
        parts = text.split("/")
        if len(parts) == 3 and parts[0] in FORMS and all(parts):
            return cls(parts[1], parts[2], parts[0])
        if len(parts) == 2 and all(parts):
            return cls(parts[0], parts[1])
        raise ValueError(f"table key {text!r} is not '<dtype>/<activation>' or '<form>/<dtype>/<activation>' "
                         f"with a form in {FORMS}")


@dataclass(frozen=True)
class Entry:
    key: Key
    K: int
    N: int
    m_lo: int
    m_hi: int
    impl: str            # one of IMPLS
    config: str          # the implementation's configuration name ("" for unfused)
    triton: str = ""     # the Triton configuration for calls captured into a CUDA graph ("" = none)
    record: dict = field(default_factory=dict, compare=False, hash=False)   # the sweep's figures

    def as_json(self) -> dict:
        return {"key": self.key.text, "K": self.K, "N": self.N, "m_lo": self.m_lo, "m_hi": self.m_hi,
                "impl": self.impl, "config": self.config, **({"triton": self.triton} if self.triton else {}),
                **self.record}

    @classmethod
    def from_json(cls, d: dict) -> Entry:
        known = {"key", "K", "N", "m_lo", "m_hi", "impl", "config", "triton"}
        e = cls(Key.parse(d["key"]), int(d["K"]), int(d["N"]), int(d["m_lo"]), int(d["m_hi"]), d["impl"],
                d.get("config", ""), d.get("triton", ""), {k: v for k, v in d.items() if k not in known})
        if e.impl not in IMPLS:
            raise ValueError(f"entry {d}: impl {e.impl!r} is not one of {IMPLS}")
        if (e.impl == "unfused") != (e.config == ""):
            raise ValueError(f"entry {d}: a kernel names its configuration, the unfused path none")
        if not 1 <= e.m_lo <= e.m_hi:
            raise ValueError(f"entry {d}: bad M range")
        return e


@dataclass(frozen=True)
class Table:
    device: str                    # the device kind, e.g. "h200"
    measured_on: str               # the device name the sweep ran on
    date: str
    torch: str
    method: str
    serves: dict                   # Key -> Key whose rows serve it
    entries: tuple[Entry, ...]
    # measured host time per call, by form: {"swiglu_fp8": {"op": us, "stock": us, "how": ...}, ...}
    # (an entry borrowed from another device's table names that device as "device")
    host_us: dict = field(default_factory=dict)

    def rows_for(self, key: Key) -> tuple[Entry, ...]:
        """The entries that serve `key`, () where the table does not serve it."""
        source = self.serves.get(key)
        return tuple(e for e in self.entries if e.key == source) if source is not None else ()

    def source_of(self, key: Key) -> Key | None:
        return self.serves.get(key)

    def configs_used(self) -> dict[str, set[str]]:
        """The configuration names the served keys' entries run, by implementation.  Training rows
        name no kernel configuration: they say whether the op runs, whose kernels its own dispatch picks."""
        out: dict[str, set[str]] = {}
        for key in self.serves:
            if key.form == TRAIN_FORM:
                continue
            for e in self.rows_for(key):
                if e.config:
                    out.setdefault(e.impl, set()).add(e.config)
        return out

    def dtypes_served(self) -> set[str]:
        """The element types of the dense keys (the ones the CUTLASS kernels are built for)."""
        return {k.dtype for k in self.serves if not k.form}

    def completed_by(self, other: Table) -> tuple[Table, tuple[Key, ...]]:
        """This table, also serving the keys only `other` serves, and those of them it borrows.

        A key `other` serves by the rows of a source key this table measured (GeGLU by SiLU's rows)
        is served by this table's own rows of that source; any other is served by `other`'s rows,
        borrowed.  So a device's table can be measured one key family at a time, the rest coming
        from the nearest device's table until then."""
        own = {e.key for e in self.entries}
        serves, borrowed, sources = dict(self.serves), [], set()
        for key, source in other.serves.items():
            if key in serves:
                continue
            serves[key] = source
            if source not in own:
                borrowed.append(key)
                sources.add(source)
        entries = in_table_order(self.entries + tuple(e for e in other.entries if e.key in sources))
        host_us = {**{form: {"device": other.device, **cost} for form, cost in other.host_us.items()}, **self.host_us}
        return dataclasses.replace(self, serves=serves, entries=entries, host_us=host_us), tuple(borrowed)

    def as_json(self) -> dict:
        return {"format": FORMAT, "device": self.device, "measured_on": self.measured_on, "date": self.date,
                "torch": self.torch, "method": self.method,
                "serves": {k.text: v.text for k, v in self.serves.items()},
                **({"host_us": self.host_us} if self.host_us else {}),
                "entries": [e.as_json() for e in self.entries]}


def load(path: Path) -> Table:
    """A table file, validated: a malformed table must fail loudly, never plan wrong kernels."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: table format {data.get('format')!r}, this package reads format {FORMAT}")
    entries = tuple(Entry.from_json(e) for e in data["entries"])
    serves = {Key.parse(k): Key.parse(v) for k, v in data["serves"].items()}
    keys = {e.key for e in entries}
    for k, v in serves.items():
        if v not in keys:
            raise ValueError(f"{path}: {k.text} is served by {v.text}, which has no entries")
    host_us = data.get("host_us", {})
    for form, cost in host_us.items():
        if not isinstance(cost, dict) or not all(isinstance(cost.get(k), (int, float)) for k in ("op", "stock")):
            raise ValueError(f"{path}: host_us of {form} is {cost!r}, not {{\"op\": us, \"stock\": us, ...}}")
    return Table(data["device"], data.get("measured_on", ""), data.get("date", ""), data.get("torch", ""),
                 data.get("method", ""), serves, entries, host_us)


def in_table_order(entries) -> tuple[Entry, ...]:
    """Entries in the order a table file holds them: by key, K, N and M bucket."""
    return tuple(sorted(entries, key=lambda e: (e.key.text, e.K, e.N, e.m_lo)))


# A table's method is one clause per sweep that installed rows, "<label> rows: <how>", joined by
# "; " (a clause's own text may hold "; ", never "; <word> rows: ").
_CLAUSE_START = re.compile(r"; (?=[\w./+-]+ rows: )")


def method_clause(method: str, label: str) -> str | None:
    """The text of the clause on `label` rows, None where the method has none."""
    head = f"{label} rows: "
    return next((c[len(head):] for c in _CLAUSE_START.split(method) if c.startswith(head)), None)


def method_with(method: str, label: str, text: str) -> str:
    """`method` with the clause on `label` rows replaced by `text` (appended where it had none);
    the other sweeps' clauses are kept as they were."""
    head = f"{label} rows: "
    return "; ".join([*(c for c in _CLAUSE_START.split(method) if c and not c.startswith(head)), head + text])


def with_rows(previous: Table, key: Key, measured: list[Entry], replaced: Callable[[Entry], bool],
              serves: dict, label: str, how: str) -> Table:
    """`previous` with the entries of `key` that `replaced` picks swapped for a sweep's `measured`
    ones, `serves` added, and the clause on `label` rows saying `how` they were chosen (and, where
    entries of `key` were kept, what it said of those)."""
    kept = [e for e in previous.entries if e.key != key or not replaced(e)]
    others = sum(1 for e in kept if e.key == key)
    old = method_clause(previous.method, label)
    if others and old:
        how += f" ({len(measured)} entries; the other {others}: {old})"
    return dataclasses.replace(previous, method=method_with(previous.method, label, how),
                               serves={**previous.serves, **serves}, entries=in_table_order(kept + measured))


def save(table: Table, path: Path) -> None:
    Path(path).write_text(json.dumps(table.as_json(), indent=1) + "\n")


def table_path(device: str) -> Path:
    return TABLES_DIR / f"{device}.json"


def shipped() -> dict[str, Table]:
    """Every table shipped with the package, by device kind."""
    return {p.stem: load(p) for p in sorted(TABLES_DIR.glob("*.json"))}


# The table whose rows serve what a device's own table does not (yet) measure.
NEAREST_TABLE = {"h100": "h200", "h200": "h100"}


@functools.cache
def completed_table(kind: str | None) -> tuple[Table | None, tuple[Key, ...], str | None]:
    """(the table that serves a device kind, the keys it borrows, the kind it borrows them from):
    the kind's shipped table completed by its nearest kind's (``Table.completed_by``), read once."""
    tables = shipped()
    own = tables.get(kind) if kind else None
    nearest = NEAREST_TABLE.get(kind or "")
    if own is None or nearest not in tables:
        return own, (), None
    table, borrowed = own.completed_by(tables[nearest])
    return table, borrowed, nearest if borrowed else None


def table_for(kind: str | None) -> Table | None:
    """The table that serves a device kind (None where there is none)."""
    return completed_table(kind)[0]


def nearest_shape(shapes, K: int, N: int) -> tuple[int, int]:
    """The measured (K, N) nearest to (K, N) in log K, log N: a model whose shape was not swept
    takes the plan of the most similar one."""
    lk, ln = math.log(K), math.log(N)
    return min(shapes, key=lambda s: ((math.log(s[0]) - lk) ** 2 + (math.log(s[1]) - ln) ** 2, s))


def rows_of(table: Table | None, key: Key) -> tuple[Entry, ...]:
    """The table's rows for `key` (none where there is no table)."""
    return table.rows_for(key) if table is not None else ()


def served(table: Table | None, key: Key, M: int, N: int, K: int, on: str, *, prefer: Key | None = None,
           look: bool = True) -> tuple[Key, str, Entry | None]:
    """The entry that serves a problem, in one pass over the table: the rows of `prefer` where one
    of their M buckets holds M, else those of `key`, then ``lookup``.  Returns the key whose rows
    serve it, where they are ("<key> on <on>") and the entry (None: the table has no rows for the
    key, or there is no table; or not `look`: a forced implementation needs the key alone)."""
    rows = rows_of(table, key)
    if prefer is not None:
        preferred = rows_of(table, prefer)
        if any(e.m_lo <= M <= e.m_hi for e in preferred):
            key, rows = prefer, preferred
    return key, f"{key.text} on {on}", lookup(rows, M, N, K) if look else None


def lookup(rows: tuple[Entry, ...], M: int, N: int, K: int) -> Entry | None:
    """The entry for a problem: the nearest measured shape, then the bucket that holds M (or the
    nearest bucket where that shape lacks it).  The C++ op does the same lookup (checked by a test)."""
    if not rows:
        return None
    shape = nearest_shape({(e.K, e.N) for e in rows}, K, N)
    points = [e for e in rows if (e.K, e.N) == shape]
    return min(points, key=lambda e: (0 if e.m_lo <= M <= e.m_hi else min(abs(M - e.m_lo), abs(M - e.m_hi)), e.m_lo))
