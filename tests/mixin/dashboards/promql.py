"""What the dashboard tests need from the generated JSON: every PromQL expression with where it
is, variables substituted, metric names, and promtool as the parser."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from ioparallax.mixin.queries import Expr, expressions, label_values_selector, panels, substitute as _substitute  # noqa: F401 (re-exported)

# Values that stand in for the dashboard variables: a VM disk and vdisk of the zero-heavy
# scenario (the e2e test uses the scenario's real ones), and the intervals Grafana would use
# with 2 s scrapes.
SAMPLE_VARS = {
    "cluster": "poc-a",
    "vm": "bench-01",
    "disk": "scsi0:1",
    "vdisk": "1000",
    "__rate_interval": "1m",
    "__interval": "2s",
}


def substitute(expr: str, values: dict[str, str] = SAMPLE_VARS) -> str:
    return _substitute(expr, values)


def promtool_parse(exprs: list[str], workdir: Path) -> subprocess.CompletedProcess:
    """``promtool check rules`` on a rule file with each expression as a recording rule."""
    rules = {
        "groups": [
            {
                "name": "dashboard-expressions",
                "rules": [{"record": f"dashboard:expr_{i}:check", "expr": e} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = workdir / "dashboard-expressions.rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False, width=1000))
    return subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)


# Words that may follow PromQL syntax without being a metric name.
_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
}
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")


def metric_names(expr: str) -> set[str]:
    """Metric names of ``expr``. Every selector in the dashboards carries matchers (``name{...}``),
    which is what makes them findable by this regex; :func:`bare_identifiers` proves there is no
    other kind in an expression."""
    no_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return {n for n in _SELECTOR.findall(no_strings) if n not in _KEYWORDS}


def bare_identifiers(expr: str) -> set[str]:
    """Identifiers that are neither a selector's name, a function, a keyword, a label in a
    ``by``/``on``/``group_left`` list or a matcher's label: a bare metric name would show here."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", "{}", s)  # matchers
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\[[^\]]*\]", "", s)  # range windows
    s = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?\b", "", s)  # numbers
    words = re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\(|\{)?", s)
    return {w for w, follow in words if not follow and w not in _KEYWORDS}


def rate_calls(expr: str) -> list[str]:
    """The argument of every rate()/irate()/increase() call, by paren matching."""
    out = []
    for m in re.finditer(r"\b(i?rate|increase)\s*\(", expr):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            i += 1
        out.append(expr[m.end() : i - 1])
    return out


def rule_names(paths: list[Path]) -> set[str]:
    names = set()
    for path in paths:
        for group in (yaml.safe_load(path.read_text()) or {}).get("groups", []):
            for rule in group.get("rules", []):
                if "record" in rule:
                    names.add(rule["record"])
    return names
