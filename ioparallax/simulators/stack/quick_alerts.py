"""``--quick-alerts``: the rules with `for` durations short enough for a demo."""

from __future__ import annotations

from pathlib import Path


def quick_alert_for() -> dict[str, str]:
    """``--quick-alerts``: the mixin config's ``for`` durations, short enough for a demo."""
    from ioparallax.mixin.config import ForDurations

    # The views-disagree alerts keep 2m: they judge 5m rates, which a young stack covers only in
    # part, where one burst more or less in one view's window than in another's moves the ratio.
    # The burst alert keeps 1m: with 20 s vCenter scrapes a 1m window integrates two or three
    # samples, so for 20 s of every minute it misses a once-a-minute checkpoint (postgres) and
    # the Little's-law ratio jumps; a 15 s `for` would fire and resolve every minute.
    return dict.fromkeys(ForDurations.__dataclass_fields__, "15s") | {"views_disagree": "2m", "burst": "1m"}


def write_quick_alert_rules(out: Path) -> Path:
    """The rule files with :func:`quick_alert_for` durations, written to ``out``."""
    from ioparallax.mixin.config import load_config
    from ioparallax.mixin.rules.files import write_rule_files

    write_rule_files(
        load_config(overrides={"for": quick_alert_for()}), out, "ioparallax/mixin/config.yml (--quick-alerts)"
    )
    return out
