"""--web.config.file: the exporter-toolkit format validated into typed objects, errors naming the
file and the key; basic auth checks cached so a scrape does not pay bcrypt each time."""

from __future__ import annotations

import ssl
from pathlib import Path

import bcrypt
import pytest

from ioparallax.exporters.common import webconfig
from ioparallax.exporters.common.webconfig import BasicAuth, load_web_config
from ioparallax.yamlconf import ConfigError
from tests.support import ec_cert


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[Path, Path]:
    return ec_cert(tmp_path_factory.mktemp("cert"), "server", "localhost")


HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()


def tls(keys: str) -> str:
    """A tls_server_config with the test certificate and key (CRT and KEY below) and ``keys``."""
    return f"tls_server_config: {{cert_file: CRT, key_file: KEY, {keys}}}\n"


def _load(tmp_path: Path, text: str):
    f = tmp_path / "web.yml"
    f.write_text(text)
    return f, load_web_config(f)


def test_no_file_is_plain_http_without_auth():
    cfg = load_web_config(None)
    assert cfg.tls is None and cfg.basic_auth_users == {} and "plain HTTP" in cfg.describe()


def test_full_config_is_typed(tmp_path, cert):
    crt, key = cert
    _, cfg = _load(
        tmp_path,
        f"""\
tls_server_config:
  cert_file: {crt}
  key_file: {key}
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: {crt}
  min_version: TLS13
http_server_config:
  http2: false
  headers: {{X-Frame-Options: deny, Strict-Transport-Security: max-age=31536000}}
basic_auth_users:
  alice: '{HASH}'
""",
    )
    assert cfg.tls.client_auth_type == "RequireAndVerifyClientCert" and cfg.tls.min_version == "TLS13"
    ctx = cfg.tls.context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    assert cfg.basic_auth_users == {"alice": HASH.encode()}
    assert cfg.headers == {"X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=31536000"}
    assert "TLS (TLS13+" in cfg.describe() and "basic auth for 1 users" in cfg.describe()


def test_empty_tls_section_means_no_tls(tmp_path):
    _, cfg = _load(tmp_path, f"tls_server_config: {{}}\nbasic_auth_users: {{bob: '{HASH}'}}\n")
    assert cfg.tls is None and list(cfg.basic_auth_users) == ["bob"]


@pytest.mark.parametrize(
    "text, key, message",
    [
        ("tls_server_confg: {}\n", "tls_server_confg", "unknown key"),
        (tls("cert_fil: x"), "tls_server_config.cert_fil", "unknown key"),
        ("tls_server_config: {key_file: KEY}\n", "tls_server_config.cert_file", "is required"),
        ("tls_server_config: {cert_file: CRT}\n", "tls_server_config.key_file", "is required"),
        (
            "tls_server_config: {cert_file: /nonexistent.pem, key_file: KEY}\n",
            "tls_server_config",
            "cannot load the certificate",
        ),
        ("tls_server_config: {cert_file: KEY, key_file: CRT}\n", "tls_server_config", "cannot load the certificate"),
        (tls("min_version: TLS14"), "tls_server_config.min_version", "unknown TLS version"),
        (tls("min_version: TLS13, max_version: TLS12"), "tls_server_config.min_version", "above max_version"),
        (
            tls("client_auth_type: RequireAnyClientCert, client_ca_file: CRT"),
            "tls_server_config.client_auth_type",
            "not supported",
        ),
        (tls("client_auth_type: Nope"), "tls_server_config.client_auth_type", "unknown value"),
        (tls("client_auth_type: RequireAndVerifyClientCert"), "tls_server_config.client_ca_file", "is required"),
        (tls("client_ca_file: CRT"), "tls_server_config.client_auth_type", "NoClientCert"),
        (tls("cipher_suites: [TLS_AES_128_GCM_SHA256]"), "tls_server_config.cipher_suites", "do not support"),
        ("tls_server_config: {cert: PEM, key: PEM}\n", "tls_server_config.cert", "do not support"),
        ("rate_limit: {interval: 1s, burst: 20}\n", "rate_limit", "do not support"),
        (
            "http_server_config: {headers: {X-Powered-By: me}}\n",
            "http_server_config.headers.X-Powered-By",
            "cannot be configured",
        ),
        (
            "http_server_config: {headers: {X-Frame-Options: allow}}\n",
            "http_server_config.headers.X-Frame-Options",
            "expected one of deny, sameorigin",
        ),
        ("http_server_config: {http3: true}\n", "http_server_config.http3", "unknown key"),
        ("basic_auth_users: {alice: plaintext-password}\n", "basic_auth_users.alice", "expected a bcrypt hash"),
        ("basic_auth_users: {alice: 12345678}\n", "basic_auth_users.alice", "expected a bcrypt hash"),
        ("basic_auth_users: {'a:b': 'HASH'}\n", "basic_auth_users.a:b", "cannot contain ':'"),
        ("basic_auth_users: [alice]\n", "basic_auth_users", "expected a mapping"),
        ("- just a list\n", None, "expected a mapping"),
        ("tls_server_config: {cert_file: [\n", None, "invalid YAML"),
        # issue 25: the second one silently replaced the first
        (
            "basic_auth_users: {alice: 'HASH'}\nheaders: {}\nbasic_auth_users: {eve: 'HASH'}\n",
            "basic_auth_users",
            "line 3, column 1: duplicate key (first at line 1)",
        ),
        ("basic_auth_users: {alice: 'HASH', alice: 'HASH'}\n", "alice", "duplicate key"),
        ("basic_auth_users: {alice: 'HASH31'}\n", "basic_auth_users.alice", "bcrypt cost 31 is above 14"),
        ("basic_auth_users: {alice: 'HASH15'}\n", "basic_auth_users.alice", "bcrypt cost 15 is above 14"),
        ("tls_server_config: &t {cert_file: CRT, key_file: KEY}\n", None, "YAML anchor &t is not accepted"),
    ],
)
def test_errors_name_file_and_key(tmp_path, cert, text, key, message):
    crt, key_file = cert
    for cost in ("31", "15"):  # a hash of that cost, made without paying it (only its form is checked)
        text = text.replace(f"HASH{cost}", HASH.replace("$04$", f"${cost}$"))
    text = text.replace("CRT", str(crt)).replace("KEY", str(key_file)).replace("HASH", HASH)
    f = tmp_path / "web.yml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_web_config(f)
    assert err.value.path == str(f)
    assert err.value.key == key
    assert message in err.value.message
    assert "plaintext-password" not in str(err.value) and "12345678" not in str(err.value)  # secrets not echoed
    assert HASH[7:] not in str(err.value)


def test_bcrypt_cost_14_is_the_highest_accepted(tmp_path):
    _, cfg = _load(tmp_path, f"basic_auth_users: {{alice: '{HASH.replace('$04$', '$14$')}'}}\n")
    assert list(cfg.basic_auth_users) == ["alice"]
    assert webconfig.MAX_BCRYPT_COST == 14


def test_a_non_utf8_web_config_is_named(tmp_path):
    f = tmp_path / "web.yml"
    f.write_bytes(b"basic_auth_users:\n  \xe9ric: x\n")
    with pytest.raises(ConfigError, match=r"web.yml: not UTF-8 text \(byte 0xe9 on line 2\)"):
        load_web_config(f)


@pytest.mark.parametrize(
    "configured, enforced", [("TLS10", "TLS12"), ("TLS11", "TLS12"), ("TLS12", "TLS12"), ("TLS13", "TLS13")]
)
def test_min_version_is_described_as_enforced(tmp_path, cert, caplog, configured, enforced):
    """OpenSSL 3 at its default security level refuses TLS 1.0 and 1.1 whatever min_version says:
    'TLS10+' was logged while TLS 1.0 handshakes failed. What is described is what a handshake
    gets, and the difference is one warning line."""
    if ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).security_level < 1 and configured in ("TLS10", "TLS11"):
        pytest.skip("this OpenSSL serves TLS 1.0/1.1")
    crt, key = cert
    caplog.set_level("WARNING", logger="ioparallax.exporters.common.webconfig")
    f, cfg = _load(tmp_path, f"tls_server_config: {{cert_file: {crt}, key_file: {key}, min_version: {configured}}}\n")
    assert f"TLS ({enforced}+," in cfg.describe()
    warned = [r.getMessage() for r in caplog.records]
    if configured == enforced:
        assert not warned
    else:
        assert len(warned) == 1 and f"{f}: tls_server_config.min_version is {configured}" in warned[0]
        assert f"{enforced} is the lowest version served" in warned[0]


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.yml: cannot read file"):
        load_web_config(tmp_path / "nope.yml")


def test_basic_auth_pays_bcrypt_once_per_pair(monkeypatch):
    calls = []
    real = webconfig.bcrypt.checkpw
    monkeypatch.setattr(webconfig.bcrypt, "checkpw", lambda pw, h: calls.append(pw) or real(pw, h))
    auth = BasicAuth({"alice": HASH.encode()})
    assert [auth.check("alice", "pw") for _ in range(5)] == [True] * 5
    assert len(calls) == 1
    assert [auth.check("alice", "wrong") for _ in range(3)] == [False] * 3
    assert len(calls) == 2
    assert auth.check("mallory", "pw") is False  # unknown user: checked against a decoy hash
    assert len(calls) == 3
    assert auth.check("alice", "x" * 100) is False  # longer than bcrypt's 72 bytes
    assert all(b"pw" not in k for k in auth._cache)  # the cache holds digests, not passwords


def test_basic_auth_cache_is_bounded():
    auth = BasicAuth({"alice": HASH.encode()}, cache_size=3)
    for i in range(10):
        auth.check("alice", f"guess-{i}")
    assert len(auth._cache) == 3
