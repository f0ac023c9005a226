"""ioparallax: guest, VM and storage views of the same I/O, side by side in Prometheus.

One package: the exporters (``ioparallax.exporters``: stargate, vcenter, prism, fio, diskspd,
vdbench, esxtop, pgbench; docs/architecture.md), the simulators (``ioparallax.simulators``), the mixin that
generates the rules, alerts and dashboards (``ioparallax.mixin``), the PoC report
(``ioparallax.report``) and the pre-flight checks (``ioparallax.check``)."""
