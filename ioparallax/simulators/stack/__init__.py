"""The demo stack: a simulated cluster and the real monitoring stack, as plain processes.

``ioparallax-demo`` (what ``make demo`` runs) starts, all bound to 127.0.0.1:

- the simulators, fed by one scenario: one Stargate server per CVM, the cluster's manager (the
  vCenter simulator on an ESXi cluster, the Prism simulator on an AHV one: the scenario's
  ``cluster.hypervisor``), the guest simulator (per Linux VM, the fio status stream and sysfs disk facts of that guest; per
  Windows VM, its windows_exporter metrics and, for DiskSPD, its -Rxml results);
- the exporters, pointed at them: the Stargate exporter, the vCenter or Prism exporter (on ESXi also the
  esxtop exporter following the esxtop simulator's 2 s captures, one per host), one fio exporter per Linux
  VM, the diskspd exporter for the DiskSPD results, the vdbench exporter for the vdbench runs;
- Debian's Prometheus (with ``deploy/`` scrape config shape and ``alerts/`` rules), Alertmanager
  and node_exporter;
- with ``--long-term``, Debian's VictoriaMetrics (single node) as Prometheus' remote_write target:
  the long-term store, holding the raw and the recorded series, queried through its
  Prometheus-compatible API;

then prints where to look, which targets are up and which alerts fire. Ctrl-C stops everything it
started, by PID. End-to-end tests use :class:`Stack` directly.

Several scenarios (``--scenario zero-heavy,clean-oltp``) run as several simulated clusters, each a
:class:`ClusterPart` with its own simulators and exporters, scraped by the one Prometheus into the
same jobs; every target of a cluster carries the cluster label (ioparallax/mixin/config.yml ``cluster_label``)
as a Prometheus target label, never set by an exporter, so the rules keep the clusters apart even
where their vdisk ids and VM names are the same.

The modules: core.py holds :class:`Stack`, the orchestrator (process handling, the clusters, the
start order, the status queries); one starter module per source (stargate.py, vcenter.py, prism.py,
guests.py, esxtop.py; monitoring.py: node_exporter, Alertmanager, VictoriaMetrics, Prometheus), each returning
the scrape configs of what it started (scrape.py); clusters.py the ``--scenario`` values as
clusters; config.py the programs' places and preferred ports; report.py the status report;
quick_alerts.py the ``--quick-alerts`` rules; cli.py ``ioparallax-demo``.
"""

from ioparallax.simulators.stack.core import Stack

__all__ = ["Stack"]
