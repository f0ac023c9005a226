"""The watch exporters' settings (common/watchconfig.py): fio, DiskSPD and vdbench read the same
keys and flags one way, flags over the file over defaults, and a bad value is one ConfigError
naming the file and the key, or the flag."""

from __future__ import annotations

import pytest

from ioparallax.exporters.diskspd import cli as diskspd_cli
from ioparallax.exporters.fio import cli as fio_cli
from ioparallax.exporters.vdbench import cli as vdbench_cli
from ioparallax.yamlconf import ConfigError

EXPORTERS = {"fio": fio_cli, "diskspd": diskspd_cli, "vdbench": vdbench_cli}


def settings(name: str, *argv: str):
    cli = EXPORTERS[name]
    args = cli.build_parser().parse_args(["serve", *argv])
    return fio_cli.settings_from(args) if name == "fio" else cli.SPEC.read(args, cli.Settings())


@pytest.mark.parametrize("name", sorted(EXPORTERS))
def test_file_then_flags(tmp_path, name):
    cfg = tmp_path / "x.yml"
    cfg.write_text("listen_address: 127.0.0.1:9999\nwatch: /from/file\nretention: 2m\ncache_size: 1GiB\n")
    s = settings(name, "--config.file", str(cfg))
    assert (s.listen, s.watch, s.retention_s, s.cache_size, s.scrape_interval_s) == (
        "127.0.0.1:9999",
        ["/from/file"],
        120.0,
        2**30,
        15.0,
    )
    s = settings(name, "--config.file", str(cfg), f"--{name}.watch", "/a", f"--{name}.watch", "/b")
    assert s.watch == ["/a", "/b"] and s.retention_s == 120.0
    s = settings(name, "--config.file", str(cfg), f"--{name}.retention", "1h", "--web.max-connections", "7")
    assert s.retention_s == 3600.0 and s.web().limits.max_connections == 7


@pytest.mark.parametrize("name", sorted(EXPORTERS))
def test_errors_name_the_file_and_key_or_the_flag(tmp_path, name):
    cfg = tmp_path / "x.yml"
    cfg.write_text("scrape_interval: 0s\n")
    with pytest.raises(ConfigError, match=rf"^{cfg}: scrape_interval: must be positive$"):
        settings(name, "--config.file", str(cfg))
    with pytest.raises(ConfigError, match=rf"^<config>: --{name}.scrape-interval: must be positive$"):
        settings(name, f"--{name}.scrape-interval", "0")
    cfg.write_text("watch: /x\nwatchh: /y\n")
    with pytest.raises(ConfigError, match=rf"^{cfg}: watchh: unknown key"):
        settings(name, "--config.file", str(cfg))
    with pytest.raises(ConfigError, match=rf"^<config>: --{name}.cache-size: expected a size such as 4KiB"):
        settings(name, f"--{name}.cache-size", "lots")
    with pytest.raises(ConfigError, match=r"^<config>: --web.listen-address: "):
        settings(name, "--web.listen-address", "nope")


@pytest.mark.parametrize(("name", "idle"), [("fio", 10.0), ("vdbench", 30.0)])
def test_idle_timeout_is_not_the_web_idle_timeout(name, idle):
    """--fio.idle-timeout and --web.idle-timeout once shared an argparse dest: fio and vdbench
    took the web server's 120 s as their idle timeout, and --fio.idle-timeout 5s set the server's
    keep-alive to the text '5s'."""
    s = settings(name)
    assert s.idle_s == idle and s.web_limits.idle_timeout == 120.0
    s = settings(name, f"--{name}.idle-timeout", "5s", "--web.idle-timeout", "30s")
    assert s.idle_s == 5.0 and s.web_limits.idle_timeout == 30.0


def test_own_keys_stay_with_their_exporter(tmp_path):
    cfg = tmp_path / "x.yml"
    cfg.write_text("max_depth: 3\n")
    assert settings("vdbench", "--config.file", str(cfg)).max_depth == 3
    with pytest.raises(ConfigError, match=rf"^{cfg}: max_depth: unknown key"):
        settings("fio", "--config.file", str(cfg))
    cfg.write_text("percentiles: all\nsettle_time: 1s\n")
    s = settings("diskspd", "--config.file", str(cfg))
    assert s.all_percentiles and s.settle_s == 1.0 and "percentiles: all" in diskspd_cli.SPEC.describe(s)
    cfg.write_text("percentiles: false\nhost: h1\n")
    s = settings("fio", "--config.file", str(cfg), "--no-collector.trim")
    assert s.switched_off() == ["percentiles", "trim"] and s.host == "h1"
