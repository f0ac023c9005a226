"""The guest view of a scenario: what fio and the block layer show inside each VM.

:class:`~simulators.guest.fio.GuestFio` computes, from the scenario's trace, the json+ status
records a ``fio --output-format=json+ --status-interval=1`` in each VM would write;
:func:`~simulators.guest.sysfs.write_tree` writes each VM's disk facts (serial = virtual disk UUID,
partition offsets) as a sysfs tree; :class:`~simulators.guest.diskstats.GuestDiskstats` computes
the guest kernel's ``/proc/diskstats`` (requests split at ``max_sectors_kb``);
:class:`~simulators.guest.writer.GuestWriter` keeps them on disk for ``fio-exporter serve`` and
node_exporter (``ioparallax-guest-simulator``).
"""
