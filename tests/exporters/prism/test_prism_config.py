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
        (
            "targets:\n  p1:\n    insecure_skip_verify: yes-ish\n",
            "targets.p1.insecure_skip_verify",
            "expected a boolean",
        ),
        (
            "targets:\n  p1:\n    insecure_skip_verify: true\n    tls_verify: true\n",
            "targets.p1.tls_verify",
            "tls_verify: true contradicts insecure_skip_verify: true",
        ),
        (
            "defaults:\n  insecure_skip_verify: false\n  tls_verify: false\ntargets:\n  p1: {}\n",
            "defaults.tls_verify",
            "tls_verify: false contradicts insecure_skip_verify: false",
        ),
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
    assert (p1.username, p1.password, p1.v2_sample_delay, p1.insecure_skip_verify) == ("mon", "s3cret-one", 12.0, False)
    # tls_verify: false is the alias of insecure_skip_verify: true
    assert cfg.targets["lab:9441"].insecure_skip_verify is True and cfg.targets["lab:9441"].password == "pw-inline-9"
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


@pytest.mark.parametrize(
    "keys, skip",
    [
        ("", False),
        ("insecure_skip_verify: true", True),
        ("insecure_skip_verify: false", False),
        ("tls_verify: false", True),
        ("tls_verify: true", False),
        ("insecure_skip_verify: true\n    tls_verify: false", True),  # both, agreeing
    ],
)
def test_tls_opt_out_key_and_its_alias(tmp_path, keys, skip):
    """insecure_skip_verify is the key (Prometheus' tls_config spelling); tls_verify its alias with
    the opposite meaning; a target's key overrides the defaults' in either spelling."""
    target = f"  p1:\n    {keys}\n" if keys else "  p1: {}\n"
    cfg = _load(tmp_path, "defaults:\n  tls_verify: true\ntargets:\n" + target)
    assert cfg.targets["p1:9440"].insecure_skip_verify is skip
    assert ("verification OFF (insecure_skip_verify)" in cfg.describe()) is skip


def test_a_target_turns_verification_back_on_with_the_alias(tmp_path):
    cfg = _load(tmp_path, "defaults:\n  insecure_skip_verify: true\ntargets:\n  p1:\n    tls_verify: true\n  p2: {}\n")
    assert cfg.targets["p1:9440"].insecure_skip_verify is False and cfg.targets["p2:9440"].insecure_skip_verify is True
