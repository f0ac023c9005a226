"""The watch engine the watch exporters (fio, DiskSPD, vdbench, esxtop, pgbench) run on.

A watch exporter reads the result files a load generator writes. What is the same in all five
lives here, what differs is the tool's own:

- :mod:`.engine`: :class:`~.engine.Watcher`, the sources under the watched paths. It finds them
  (``common/watchdir.py``), logs a watched path that cannot be read once, forgets a source that
  went away, reads each source in isolation (a bug in one costs that source only: reason
  ``internal_error``), keeps each source's up/down state with one log line per change, and tells
  the collector, per source, whether its writer has ended and whether it is still shown
  (retention). A tool subclasses it and supplies how a source is opened and read (its
  ``reader.py``) and, where it differs on purpose, when a run has ended and how long it stays.
- :mod:`.scrape`: :class:`~.scrape.WatchCollector`, one scrape: poll, every source's families
  staged and committed whole (``common/families.py``), the ``<tool>_source_up`` and
  ``<tool>_source_error_info`` families, ``<tool>_up`` and ``<tool>_scrape_duration_seconds``.
- :mod:`.cli`: :class:`~.cli.WatchProgram`, the commands alike in all five (the parser with
  ``serve``, serving, ``convert``'s output, ``backfill``, ``main``); the tool's ``cli.py`` keeps
  its texts, its watcher and collectors, and which files it calls bad.
- :mod:`.wrapper`: wrapper mode (``run -- <tool> ...``, fio and pgbench): the process, its
  running/exit-code families, serving while it runs.
"""
