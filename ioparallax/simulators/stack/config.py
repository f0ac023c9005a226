"""Where the demo's programs are and the ports it prefers."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from ioparallax.paths import workspace
from ioparallax.simulators.process import free_port

# The Go vCenter simulator `make deps-go` builds; the demo's state under .run/ (in a checkout, beside
# the Makefile; from an installed wheel, in the current directory: ioparallax/paths.py).
BUILD = workspace() / ".build"
BIN = Path(sys.executable).parent

# Preferred ports for the demo (the usual ones, so the URLs are familiar); a busy port falls back
# to a free one.
PREFERRED_PORTS = {
    "prometheus": 9090,
    "alertmanager": 9093,
    "node-exporter": 9100,
    "stargate-exporter": 9761,
    "vcenter-exporter": 9762,
    "prism-exporter": 9764,
    "fio-exporter": 9763,  # the first VM's; the others get free ports
    "diskspd-exporter": 9765,
    "vdbench-exporter": 9766,
    "pgbench-exporter": 9767,  # the first database VM's; the others get free ports
    "esxtop-exporter": 9768,
    "victoria-metrics": 8428,
}


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pick_port(name: str, fixed: bool) -> int:
    preferred = PREFERRED_PORTS.get(name)
    if fixed and preferred and port_is_free(preferred):
        return preferred
    return free_port()
