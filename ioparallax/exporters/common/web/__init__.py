"""The HTTP side shared by all ioparallax exporters, one module per job.

Routes, as the blackbox and snmp exporters have them:

- ``/``            a landing page: what this exporter is, its probe URL, its config
- ``/metrics``     the exporter's own process metrics and ``<name>_build_info`` (never a target's data)
- ``/probe``       ``?target=...``: the target's exposition, written fresh per request while Prometheus waits
- ``/-/healthy``   200 OK while the process serves

A probe is given a deadline derived from Prometheus' ``X-Prometheus-Scrape-Timeout-Seconds``
header less ``--web.timeout-offset`` (as blackbox_exporter does) so that it answers with
``<source>_up 0`` before Prometheus gives up, instead of letting the scrape fail with no
explanation. A header that is not a positive finite number is ignored; one above
:data:`.app.MAX_SCRAPE_TIMEOUT_SECONDS` is clamped to it.

``--web.config.file`` (ioparallax.exporters.common.webconfig) adds TLS and basic auth; as in the
exporter-toolkit, basic auth then guards every route, ``/-/healthy`` included.

- :mod:`.app`      what an exporter hands the server (ExporterApp, Probe, BadRequest, StartupError)
- :mod:`.landing`  the landing page at ``/``
- :mod:`.handler`  the routes, basic auth, gzip and the per-connection read deadlines
- :mod:`.server`   the threading server: listen addresses, TLS handshake, connection cap, limits
- :mod:`.startup`  the ``--web.*`` flags and :func:`~.startup.serve`, the one start-up path of the CLIs
"""
