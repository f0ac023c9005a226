"""The ioparallax Grafana dashboards, as code (grafana-foundation-sdk, Grafana 11.6 build).

One module per dashboard (overview, three_views, vdisk, fio, vcenter); base.py holds what they
share (the variables, the dashboard frame, ``Expr``: the PromQL built from the config), panels.py
the panel builders, and build.py ``build_dashboards(cfg)`` ({file name: dashboard JSON model}) and
``write_dashboards(cfg, outdir)``, which writes them with sorted keys and 2-space indents, so
regenerating from the same config gives the same bytes (tests/mixin/dashboards checks it against the
committed dashboards/).

One variable vocabulary on every dashboard: ``$datasource``, ``$vm`` and ``$disk`` (from the
recording rule ``vm_disk:ioparallax_vm_source:info``: the VM disks vCenter or Prism knows; the VM
disk is the join key of the three views) and ``$vdisk``
(``stargate_vdisk_info`` of that VM disk). Guest series join through the recording rule
``guest_device:ioparallax_guest_disk:info``; storage series through ``stargate_vdisk_info``.
See docs/dashboards.md.
"""
