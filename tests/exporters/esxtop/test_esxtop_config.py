"""esxtop-exporter's settings (common/watchconfig.py): flags over the file over defaults, its own
keys checked, errors naming the file and the key, or the flag."""

from __future__ import annotations

import pytest

from ioparallax.exporters.esxtop import cli
from ioparallax.exporters.esxtop.config import Settings
from ioparallax.yamlconf import ConfigError
from tests.support import run_entry_point


def settings(*argv: str) -> Settings:
    return cli.SPEC.read(cli.build_parser().parse_args(["serve", *argv]), Settings())


def test_defaults_file_then_flags(tmp_path):
    s = settings()
    assert (s.listen, s.pattern, s.idle_s, s.max_delay_s, s.max_clock_skew_s, s.retention_s) == (
        ":9768",
        "*.csv",
        30.0,
        5.0,
        60.0,
        900.0,
    )
    cfg = tmp_path / "x.yml"
    cfg.write_text("watch: [/var/lib/esxtop]\npattern: '*.txt'\nmax_delay: 3s\nmax_clock_skew: 2m\n")
    s = settings("--config.file", str(cfg))
    assert (s.watch, s.pattern, s.max_delay_s, s.max_clock_skew_s) == (["/var/lib/esxtop"], "*.txt", 3.0, 120.0)
    s = settings("--config.file", str(cfg), "--esxtop.max-delay", "10s", "--esxtop.watch", "/a")
    assert (s.watch, s.max_delay_s) == (["/a"], 10.0)


def test_errors_name_the_file_and_key_or_the_flag(tmp_path):
    cfg = tmp_path / "x.yml"
    cfg.write_text("max_delay: 0s\n")
    with pytest.raises(ConfigError, match=rf"^{cfg}: max_delay: must be positive$"):
        settings("--config.file", str(cfg))
    with pytest.raises(ConfigError, match=r"^<config>: --esxtop.idle-timeout: must be positive$"):
        settings("--esxtop.idle-timeout", "0")
    cfg.write_text("cache_size: 1GiB\n")  # a key of the other watch exporters, not this one's
    with pytest.raises(ConfigError, match=rf"^{cfg}: cache_size: unknown key"):
        settings("--config.file", str(cfg))


def test_a_configuration_mistake_exits_2_with_one_line():
    out = run_entry_point("esxtop-exporter", ["convert", "--esxtop.max-delay", "soon", "x.csv"])
    assert out.returncode == 2
    assert "configuration error: <config>: --esxtop.max-delay:" in out.stderr
    out = run_entry_point("esxtop-exporter", ["convert", "/no/such/file.csv"])
    assert out.returncode == 1
    assert "esxtop-exporter convert: /no/such/file.csv: no such file or directory" in out.stderr


def test_long_delay_allows_esxtop_its_collection_time():
    from ioparallax.exporters.esxtop.hygiene import Capture, HygieneConfig, problems

    def capture(mean: float) -> Capture:
        return Capture(
            samples=100, first_ts=0.0, last_ts=99 * mean, mean_interval_s=mean, finished=True, last_growth=1.0
        )

    assert problems(capture(5.4), HygieneConfig()) == []  # -d 5, stretched by esxtop's own work
    assert problems(capture(5.6), HygieneConfig()) == ["long_delay"]
    assert problems(capture(2.0), HygieneConfig(max_delay_s=1.0)) == ["long_delay"]
