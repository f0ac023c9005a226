"""The Prism simulator's fixture is the Prism exporter tests' own: tests/exporters/prism/conftest.py."""

from tests.exporters.prism.conftest import prism_sim  # noqa: F401 (fixture)
