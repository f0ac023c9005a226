"""The VM view of an AHV cluster: the Prism simulator and the Prism exporter."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.launch import Credentials, Launcher, start_announcing, start_api_exporter


def start_prism(stack: Launcher, part: ClusterPart) -> list[dict[str, Any]]:
    """The Prism simulator (HTTPS with a certificate made for this run) and the Prism exporter
    probing it, TLS verified against that certificate (``ca_file``), as against a real Prism."""
    cert, key = part.workdir / "prism-cert.pem", part.workdir / "prism-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
        + ["-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    url_file = part.workdir / "prism-url.json"
    password = "demo-" + os.urandom(6).hex()  # a fresh one per run; never printed
    env = {"IOPARALLAX_DEMO_PRISM_PASSWORD": password}
    argv: list[Any] = ["prism-simulator", "--listen", "127.0.0.1:0", "--username", "demo"]
    argv += ["--password-env", "IOPARALLAX_DEMO_PRISM_PASSWORD", "--tls-cert", cert, "--tls-key", key]
    argv += ["--url-file", url_file]
    sim_url = start_announcing(stack, part, "prism-simulator", argv, url_file, env)["prism"]
    stack.urls[part.proc("prism-simulator")] = sim_url
    target = sim_url.split("://", 1)[1].rstrip("/")
    return start_api_exporter(
        stack,
        part,
        "prism",
        target,
        {"ca_file": str(cert)},
        Credentials("demo", "IOPARALLAX_DEMO_PRISM_PASSWORD", password),
        stack.prism_scrape_interval,
    )
