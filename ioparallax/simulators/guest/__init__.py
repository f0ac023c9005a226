"""The guest view of a scenario: what fio and the block layer show inside each VM.

:class:`~ioparallax.simulators.guest.fio.GuestFio` computes, from the scenario's trace, the json+ status
records a ``fio --output-format=json+ --status-interval=1`` in each VM would write;
:func:`~ioparallax.simulators.guest.sysfs.write_tree` writes each VM's disk facts (serial = virtual disk UUID,
partition offsets) as a sysfs tree; :class:`~ioparallax.simulators.guest.diskstats.GuestDiskstats` computes
the guest kernel's ``/proc/diskstats`` (requests split at ``max_sectors_kb``);
:class:`~ioparallax.simulators.guest.writer.GuestWriter` keeps them on disk for ``fio-exporter serve`` and
node_exporter (``ioparallax-guest-simulator``).
"""
