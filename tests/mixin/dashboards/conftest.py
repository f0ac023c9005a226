"""Session fixtures of the dashboard tests: the generated dashboards. The metric names the
exporters really expose (``exposed_names``) come from tests/conftest.py."""

from __future__ import annotations

import pytest

from ioparallax.mixin.config import load_config
from ioparallax.mixin.dashboards.build import build_dashboards


@pytest.fixture(scope="session")
def cfg():
    return load_config()


@pytest.fixture(scope="session")
def dashboards(cfg):
    return build_dashboards(cfg)
