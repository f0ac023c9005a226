"""The cluster label through every expression of the mixin (``cluster_label`` in ioparallax/mixin/config.yml).

vdisk ids are unique only within a cluster, and two clusters of a PoC comparison often run VMs of
the same names. Every ``by (...)`` and ``on (...)`` of the generated rules, alerts and dashboard
queries therefore keeps the cluster label, so nothing is summed or joined across clusters. It is
done in one place, on the finished expressions, so a join added later cannot forget it (the tests
check every grouping of the generated files). A series without the label (one cluster per
Prometheus) groups and joins as before: an absent label is the empty value on both sides.

``ignoring (...)`` and ``group_left (...)`` / ``group_right (...)`` are left alone: the first lists
labels left out of the match (the cluster must stay in it), the others labels copied across.
"""

from __future__ import annotations

import re

_GROUPING = re.compile(r"\b(by|on)\s*\(([^()]*)\)")
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def per_cluster(expr: str, label: str) -> str:
    """``expr`` with ``label`` first in every ``by (...)`` and ``on (...)`` ('' : unchanged)."""
    if not label:
        return expr

    def add(m: re.Match) -> str:
        labels = [x.strip() for x in m.group(2).split(",") if x.strip()]
        if label not in labels:
            labels.insert(0, label)
        return f"{m.group(1)} ({', '.join(labels)})"

    return _GROUPING.sub(add, expr)


def select_cluster(expr: str, label: str, variable: str = "cluster") -> str:
    """Every ``name{...}`` selector of ``expr`` with ``label=~"$variable"`` first (dashboards)."""
    if not label:
        return expr
    matcher = f'{label}=~"${variable}"'

    def add(m: re.Match) -> str:
        rest = expr[m.end() :]
        if rest.startswith(matcher):
            return m.group(0)
        return f"{m.group(1)}{{{matcher}" + ("" if rest.startswith("}") else ",")

    return _SELECTOR.sub(add, expr)


def groupings(expr: str) -> list[tuple[str, list[str]]]:
    """Every ``by``/``on`` of ``expr`` with its labels (for the tests)."""
    return [(m.group(1), [x.strip() for x in m.group(2).split(",") if x.strip()]) for m in _GROUPING.finditer(expr)]
