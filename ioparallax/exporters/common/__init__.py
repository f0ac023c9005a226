"""What the eight exporters share (docs/architecture.md): the web front, configuration, logging,
the multi-target wiring and capture archives of the network exporters (stargate, vcenter, prism),
the settings, file finding and families of the exporters that watch files (fio, diskspd, vdbench,
esxtop, pgbench)."""
