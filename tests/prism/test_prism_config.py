"""prism-exporter's configuration: errors name the file and the key; flags override the file;
the landing page and logs never show a password."""

from __future__ import annotations

import pytest

from ioparallax.exporters.prism.config import load_config
from ioparallax.yamlconf import ConfigError

ENV = {"P1": "s3cret-one", "PRISM_PASSWORD": "s3cret-env", "PRISM_USERNAME": "envuser"}


def _load(tmp_path, text: str, **kw):
    path = tmp_path / "prism.yml"
    path.write_text(text)
    return load_config(str(path), env=dict(ENV), **kw)


@pytest.mark.parametrize(
    "text, key, message",
    [
        ("targets:\n  p1:\n    page_size: 0\n", "targets.p1.page_size", "expected 1-10000"),
        ("targets:\n  p1:\n    v2_sample_delay: 40s\n", "targets.p1.v2_sample_delay", "0s-25s"),
        ("targets:\n  p1:\n    password_env: NOPE\n", "targets.p1.password_env", "NOPE is not set"),
        ("targets:\n  p1:\n    password: a\n    password_env: P1\n", "targets.p1.password", "not both"),
        ("targets:\n  p1:\n    controller_api: v3\n", "targets.p1.controller_api", "v2 or v4"),
        ("targets:\n  p1:\n    scheme: ftp\n", "targets.p1.scheme", "https"),
        ("targets:\n  p1:\n    tls_verfy: false\n", "targets.p1", "tls_verfy"),
        ("targets:\n  p1: {}\n  P1:9440: {}\n", "targets.P1:9440", "same target"),
        ("targets:\n  'https://u@p1/': {}\n", "targets.https://u@p1/", "user info"),
        ("targets:\n  p1:\n    ca_file: /nonexistent.pem\n", "targets.p1.ca_file", "no such file"),
        ("defaults: {}\n", "targets", "no targets listed"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path, text, key, message):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    assert str(tmp_path / "prism.yml") in str(err.value)
    assert key in str(err.value) and message in str(err.value), str(err.value)


def test_defaults_targets_and_flags(tmp_path):
    cfg = _load(
        tmp_path,
        "defaults:\n  username: mon\n  password_env: P1\n  v2_sample_delay: 12s\nlatest_samples: false\n"
        "targets:\n  PRISM1.example.com.: {}\n  lab:9441:\n    tls_verify: false\n    password: pw-inline-9\n",
        extra_targets=["p3"],
        controller=False,
    )
    assert sorted(cfg.targets) == ["lab:9441", "p3:9440", "prism1.example.com:9440"]
    p1 = cfg.targets["prism1.example.com:9440"]
    assert (p1.username, p1.password, p1.v2_sample_delay, p1.tls_verify) == ("mon", "s3cret-one", 12.0, True)
    assert cfg.targets["lab:9441"].tls_verify is False and cfg.targets["lab:9441"].password == "pw-inline-9"
    assert not cfg.collectors.latest_samples and not cfg.collectors.controller and cfg.collectors.vm_info
    text = cfg.describe()
    assert "s3cret" not in text and "pw-inline-9" not in text
    assert "verification OFF" in text and "env P1" in text
    assert cfg.target("other:9440") is None and "not listed" in cfg.refusal("other:9440")


def test_environment_only(tmp_path):
    cfg = load_config(None, env={**ENV, "PRISM_TARGETS": "a, b:1"})
    assert sorted(cfg.targets) == ["a:9440", "b:1"]
    assert cfg.targets["a:9440"].username == "envuser" and cfg.targets["a:9440"].password == "s3cret-env"
    with pytest.raises(ConfigError, match="--prism.target"):
        load_config(None, env={}, extra_targets=["a/b"])
