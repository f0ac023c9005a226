"""``ioparallax-mixin``: generate the Prometheus rules and the Grafana dashboards from one config."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ioparallax.mixin.config import DEFAULT_CONFIG, load_config
from ioparallax.mixin.rules.files import rule_files, write_rule_files
from ioparallax.paths import PACKAGE, SOURCE_TREE
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.version import add_version_arg
from ioparallax.yamlconf import ConfigError

# In a checkout the committed files are regenerated in place; an installed wheel writes beside the
# current directory unless --out says where.
OUT_BASE = SOURCE_TREE if SOURCE_TREE is not None else Path(".")


def _config_name(path: Path) -> str:
    try:
        # ioparallax/mixin/config.yml, as the generated files name it, installed or not
        return str(path.resolve().relative_to(PACKAGE.parent))
    except ValueError:
        return str(path)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ioparallax-mixin",
        description="Generate ioparallax's recording rules, alerts and Grafana dashboards from one config "
        "of selectors, thresholds and windows (ioparallax/mixin/config.yml). The generated files are "
        "committed, so users need no Python to load them.",
        epilog="Examples:\n"
        "  ioparallax-mixin rules                      # alerts/*.rules.yml from ioparallax/mixin/config.yml\n"
        "  ioparallax-mixin rules --check              # exit 1 if alerts/ is not what the config gives\n"
        "  ioparallax-mixin --config my.yml rules --out /etc/prometheus/rules\n"
        "  ioparallax-mixin dashboards                 # dashboards/*.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="the mixin config (default: %(default)s)")
    add_version_arg(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    p_rules = sub.add_parser("rules", help="write the recording rules and alerts")
    p_rules.add_argument("--out", type=Path, default=OUT_BASE / "alerts", help="directory (default: %(default)s)")
    p_rules.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the files in --out differ from a fresh generation",
    )
    p_rules.add_argument(
        "--interval",
        help="evaluation interval written into every group (default: none, "
        "Prometheus' global evaluation_interval applies)",
    )
    p_dash = sub.add_parser("dashboards", help="write the Grafana dashboards (JSON)")
    p_dash.add_argument("--out", type=Path, default=OUT_BASE / "dashboards", help="directory (default: %(default)s)")
    args = parser.parse_args(argv)

    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"ioparallax-mixin: {exc}", file=sys.stderr)
        return 2
    name = _config_name(args.config)

    if args.command == "rules":
        if args.check:
            stale = [
                fn
                for fn, text in rule_files(cfg, name, args.interval).items()
                if not (args.out / fn).is_file() or (args.out / fn).read_text() != text
            ]
            for fn in stale:
                print(
                    f"ioparallax-mixin: {args.out / fn} is not what {name} generates: run `make rules`", file=sys.stderr
                )
            return 1 if stale else 0
        for path in write_rule_files(cfg, args.out, name, args.interval):
            print(path)
        return 0

    try:
        from ioparallax.mixin.dashboards.build import write_dashboards
    except ImportError as exc:
        print(
            f"ioparallax-mixin: the dashboards need the `dashboards` extra (grafana-foundation-sdk): {exc}",
            file=sys.stderr,
        )
        return 2
    for path in write_dashboards(cfg, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
