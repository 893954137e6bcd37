"""The evidence kept for a shipped table's rows (``benchmarks/data/sweeps/<device>/<family>.json``):
per point, the candidates that could have been chosen, not every configuration timed.

A compacted row keeps its point, clock, choice and references, and of its candidates those whose
numerics passed and that are within ``WITHIN`` of the fastest correct one (of the Triton rows:
of the fastest Triton row), the unfused path, every burst-timed one, the two best scores and the
chosen and runner-up names; times as measured, quartiles to 0.1 us, numerics as the two figures
the rules read.  Choosing again from it (``sweep.py --rechoose``) gives the choices the full sweep
gives: the dropped candidates were neither the fastest nor within any margin of it.  Rows chosen
across several machines' sweeps carry those machines' rows of the point (``other_machines``),
compacted with the same names.  Torch-free.
"""

from __future__ import annotations

import json

from inductor_swiglu.dispatch import choice

WITHIN = 0.15
KEPT = (f"per point: the candidates within {100 * WITHIN:.0f}% of the fastest correct one, the unfused path, "
        "the burst-timed ones, the chosen and the runner-up; every reference")
NUMERICS = ("frac_over_1pct_resolved", "normwise")
ROW_FIELDS_DROPPED = ("candidates", "references", "other_machines")


def significant(x, digits: int = 4):
    return float(f"{x:.{digits}g}") if isinstance(x, float) else x


def figures(c: dict) -> dict:
    """A candidate's or reference's entry with its times as measured, quartiles to 0.1 us and the
    numerics the rules read."""
    out = {}
    for k, v in c.items():
        if k in ("us_p25", "us_p75"):
            out[k] = round(v, 1)
        elif k in ("numerics", "fast_accum_bound") and isinstance(v, dict):
            out[k] = {n: significant(v[n]) for n in NUMERICS if n in v}
        elif k == "error":
            out[k] = v[:200]
        else:
            out[k] = significant(v, 6) if k == "gate_normwise" else v
    return out


def names_to_keep(row: dict) -> set[str]:
    """The candidates of a row that a choice may turn on (see the module docstring)."""
    passed = {n: c for n, c in row["candidates"].items() if c.get("numerics_ok") and "us" in c}
    keep = {n for n, c in passed.items() if c.get("burst_us")}
    for triton in (False, True):
        group = {n: c["us"] for n, c in passed.items() if n.startswith("triton:") == triton}
        if group:
            fastest = min(group.values())
            keep |= {n for n, us in group.items() if us <= fastest * (1 + WITHIN)}
    scores = choice.ok_times(row) if passed else {}
    keep |= set(sorted(scores, key=scores.get)[:2])
    ch = row.get("choice") or {}
    if ch.get("impl"):
        keep.add(choice.candidate_name(ch["impl"], ch.get("config", "")))
    keep |= {n for n in (ch.get("runner_up"), f"triton:{ch['triton']}" if ch.get("triton") else None) if n}
    keep |= {n for n in row["candidates"] if n in ("unfused", "op")}
    return keep


def compact_row(row: dict, keep: set[str] | None = None) -> dict:
    """`row` with only the candidates in `keep` (default: its own ``names_to_keep``)."""
    keep = names_to_keep(row) if keep is None else keep
    out = {k: (figures(v) if k == "fast_accum_bound" else v) for k, v in row.items() if k not in ROW_FIELDS_DROPPED}
    out["candidates"] = {n: figures(c) for n, c in row["candidates"].items() if n in keep}
    out["references"] = {n: figures(c) for n, c in row["references"].items()}
    return out


def compact_point(row: dict, others: list[dict]) -> dict:
    """A row chosen across machines, with the other machines' rows of its point, every one keeping
    the names any of them keeps."""
    keep = set().union(names_to_keep(row), *map(names_to_keep, others))
    out = compact_row(row, keep)
    if others:
        out["other_machines"] = [compact_row(o, keep) for o in others]
    return out


def source_meta(meta: dict) -> dict:
    """What a kept file says of a sweep it keeps rows of: its conditions, not the library's listing."""
    return {k: v for k, v in meta.items() if k not in ("kernels", "partial", "other_machines")}


def evidence_file(sources: dict[str, dict], rows: list[dict], key, device_kind: str) -> dict:
    """A kept-evidence file: `rows` (each naming its ``sweep`` in `sources`, by name) under a meta
    that says where they were measured."""
    metas = list(sources.values())
    # what every source shares (device, torch, the sustained threshold, ...) also heads the file
    common = {k: v for k, v in metas[0].items() if k != "date" and all(m.get(k) == v for m in metas)}
    return {"meta": {"date": max(m.get("date", "") for m in metas), **common, "device_kind": device_kind,
                     "key": key.text if key is not None else None, "kept": KEPT, "sources": sources},
            "rows": rows}


def compact(rows: list[dict], meta: dict, table, key, name: str | None = None) -> dict:
    """The evidence of a sweep's rows (a fresh sweep's, or a re-chosen one's), one source."""
    name = name or f"{meta.get('date')} {meta.get('form', '')}".strip()
    return evidence_file({name: source_meta(meta)}, [{**compact_point(r, r.get("other_machines", [])), "sweep": name}
                                                     for r in rows],
                         key, meta.get("device_kind") or (table.device if table is not None else ""))


def dumps(kept: dict) -> str:
    """One row a line: small diffs when a family's rows are chosen again."""
    rows = ",\n".join(json.dumps(r, separators=(",", ":")) for r in kept["rows"])
    return "{\"meta\": " + json.dumps(kept["meta"], indent=1) + ",\n\"rows\": [\n" + rows + "\n]}\n"
