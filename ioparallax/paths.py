"""Where the files the programs read live, in a source checkout and in an installed wheel alike.

The generated rules and dashboards are committed at the top of the repository (``alerts/``,
``dashboards/``: users load them from there with no Python). The package reaches them through
``ioparallax/shipped/``, whose two entries are links to those folders: a checkout reads them
through the links, and a wheel (``pip install .``) holds real copies of them (setuptools follows
the links; pyproject.toml's package-data), so an installed ``ioparallax-demo``, the demo's
dashboard coverage and the report never reach back into a source tree that is not there.

``SOURCE_TREE`` is the checkout the package runs from (it has pyproject.toml beside the package),
or None in an installed wheel: only ``make`` targets' outputs (``.run/``, ``.build/``) and the
defaults of ``ioparallax-mixin`` (regenerate the committed files) depend on it.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SHIPPED = PACKAGE / "shipped"
#: The generated Prometheus rule files (recording rules and alerts) and their promtool tests.
ALERTS_DIR = SHIPPED / "alerts"
#: The generated Grafana dashboards (JSON).
DASHBOARDS_DIR = SHIPPED / "dashboards"

_ROOT = PACKAGE.parent
SOURCE_TREE: Path | None = _ROOT if (_ROOT / "pyproject.toml").is_file() and (_ROOT / "ioparallax").is_dir() else None


def workspace() -> Path:
    """Where the demo and the report keep their state: the checkout in a source tree (``.run/``
    beside the Makefile), else the current directory."""
    return SOURCE_TREE if SOURCE_TREE is not None else Path.cwd()
