"""The scenario vCenter simulator's fixtures are the vCenter exporter tests' own (one place starts
the built binary and connects to it): tests/exporters/vcenter/conftest.py."""

from tests.exporters.vcenter.conftest import bursty_trace, connect, postgres_trace, scenario_sim  # noqa: F401 (fixtures)
