"""A rule and a group of rules, as the generator builds them before writing the YAML."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ioparallax.mixin.cluster import per_cluster
from ioparallax.mixin.config import MixinConfig


@dataclass
class Rule:
    comment: str
    expr: str
    record: str | None = None
    alert: str | None = None
    for_: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"record": self.record} if self.record else {"alert": self.alert}
        d["expr"] = self.expr.strip() + "\n"
        if self.for_:
            d["for"] = self.for_
        if self.labels:
            d["labels"] = dict(self.labels)
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        return d


@dataclass
class Group:
    name: str
    comment: str
    rules: list[Rule]


def keep_cluster(groups: list[Group], cfg: MixinConfig) -> list[Group]:
    """Every by/on of every rule keeps the cluster label (ioparallax/mixin/cluster.py)."""
    for g in groups:
        for rule in g.rules:
            rule.expr = per_cluster(rule.expr, cfg.cluster_label)
    return groups
