"""``--web.config.file``: TLS and basic auth on an exporter's own endpoint.

The file has the format of the Prometheus exporter-toolkit (docs/web-configuration.md there), so
one file and one habit serve node_exporter, blackbox_exporter and these exporters::

    tls_server_config:
      cert_file: /etc/ioparallax/tls.crt
      key_file: /etc/ioparallax/tls.key
      # client_auth_type: RequireAndVerifyClientCert
      # client_ca_file: /etc/ioparallax/clients-ca.crt
      # min_version: TLS12
    http_server_config:
      headers: {X-Content-Type-Options: nosniff}
    basic_auth_users:
      prometheus: $2y$10$...   # bcrypt hash: htpasswd -nBC 10 "" | tr -d ':\\n'

What the toolkit has and Python's ssl module cannot do the same way (inline ``cert``/``key``,
``cipher_suites``, ``curve_preferences``, ``client_allowed_sans``, ``rate_limit``, the client auth
types that accept an unverified certificate) is refused with an error naming the key, rather than
ignored: a security setting that silently does nothing is worse than none. The file is read once,
at start-up (the toolkit re-reads it per request); restart the exporter to apply a change.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import ssl
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import bcrypt

from ioparallax.yamlconf import ConfigError, Section, load_yaml

log = logging.getLogger(__name__)

#: client_auth_type values (Go's tls.ClientAuthType names) -> ssl verify mode. RequestClientCert
#: and RequireAnyClientCert accept a certificate without verifying it, which ssl cannot do.
CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

#: Response headers the toolkit lets a web config set, with the values it allows (None: any).
EXTRA_HEADERS: dict[str, tuple[str, ...] | None] = {
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}

#: Highest bcrypt cost accepted in basic_auth_users. Each (user, password) pair not seen before
#: costs one bcrypt check, so every wrong password a client sends costs 2^cost rounds of CPU:
#: ~50 ms at cost 10 (htpasswd's -C 10, the usual choice), ~0.8 s at 14, and days at 31, which
#: would let any client that can reach the port pin a core per request.
MAX_BCRYPT_COST = 14

_NOT_SUPPORTED = "is an exporter-toolkit setting these exporters do not support; remove it"
_BCRYPT_HASH = re.compile(r"^\$2[abxy]?\$(\d\d)\$[./A-Za-z0-9]{53}$")


@dataclass(frozen=True)
class TLSServerConfig:
    cert_file: str
    key_file: str
    client_auth_type: str = "NoClientCert"
    client_ca_file: str | None = None
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    #: The lowest version a handshake succeeds with (set by load_web_config, which tries each):
    #: OpenSSL 3's default security level refuses TLS 1.0 and 1.1 whatever min_version says.
    enforced_min_version: str | None = None

    def context(self, verify_clients: bool = True) -> ssl.SSLContext:
        """The server-side SSLContext; certificate, key and CA files are read here."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = TLS_VERSIONS[self.min_version]
        ctx.maximum_version = TLS_VERSIONS[self.max_version]
        ctx.load_cert_chain(self.cert_file, self.key_file)
        if verify_clients:
            ctx.verify_mode = CLIENT_AUTH_TYPES[self.client_auth_type]
            if self.client_ca_file:
                ctx.load_verify_locations(cafile=self.client_ca_file)
        return ctx

    def lowest_version_served(self) -> str | None:
        """The lowest of min_version..max_version that a handshake with this server context
        succeeds with (in memory, with a client that allows every version and cipher), or None."""
        server = self.context(verify_clients=False)
        names = list(TLS_VERSIONS)
        for name in names[names.index(self.min_version) : names.index(self.max_version) + 1]:
            if _handshake_succeeds(server, TLS_VERSIONS[name]):
                return name
        return None

    @property
    def shown_min_version(self) -> str:
        return self.enforced_min_version or self.min_version


def _handshake_succeeds(server_ctx: ssl.SSLContext, version: ssl.TLSVersion) -> bool:
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    try:
        client_ctx.minimum_version = client_ctx.maximum_version = version
        client_ctx.set_ciphers("ALL:@SECLEVEL=0")  # the client never the limit: only the server's
    except (ValueError, ssl.SSLError):
        return False
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(10):  # a TLS 1.2 handshake is 2 round trips
        for i, (end, out, peer_in) in enumerate(((client, c_out, s_in), (server, s_out, c_in))):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLError, OSError):
                    return False
            data = out.read()
            if data:
                peer_in.write(data)
        if all(done):
            return client.version() is not None
    return False


@dataclass(frozen=True)
class WebConfig:
    path: str | None = None
    tls: TLSServerConfig | None = None
    basic_auth_users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    headers: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        if self.path is None:
            return "no web config: plain HTTP, no authentication"
        tls = (
            f"TLS ({self.tls.shown_min_version}+, client certificates: {self.tls.client_auth_type})"
            if self.tls
            else "plain HTTP (no tls_server_config)"
        )
        auth = f"basic auth for {len(self.basic_auth_users)} users" if self.basic_auth_users else "no basic auth"
        return f"web config {self.path}: {tls}, {auth}"


def load_web_config(path: str | os.PathLike[str] | None) -> WebConfig:
    """Read and check a web config file; every problem is a ConfigError naming file and key.
    The certificate and key are loaded here too, so a bad PEM stops the start-up."""
    if path is None:
        return WebConfig()
    path = str(path)
    root = Section(load_yaml(path), path)
    tls_section = root.section("tls_server_config")
    tls = _tls_config(tls_section) if tls_section.data else None  # empty or null: no TLS, as in the toolkit
    headers = _headers(root.section("http_server_config"))
    users = _users(root)
    for unsupported in ("rate_limit",):
        if unsupported in root.data:
            raise root.error(unsupported, _NOT_SUPPORTED)
    root.reject_unknown()
    config = WebConfig(path=path, tls=tls, basic_auth_users=users, headers=headers)
    if tls is not None:
        try:
            tls.context()
            lowest = tls.lowest_version_served()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                path,
                "tls_server_config",
                f"cannot load the certificate, key or CA file: {getattr(exc, 'strerror', None) or exc}",
            ) from None
        if lowest is None:
            raise ConfigError(
                path,
                "tls_server_config.min_version",
                f"no TLS version from {tls.min_version} to {tls.max_version} can be served with this "
                f"certificate and {ssl.OPENSSL_VERSION}",
            )
        if lowest != tls.min_version:
            log.warning(
                "%s: tls_server_config.min_version is %s but %s (security level %d) refuses the versions "
                "below %s: %s is the lowest version served",
                path,
                tls.min_version,
                ssl.OPENSSL_VERSION,
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).security_level,
                lowest,
                lowest,
            )
        config = replace(config, tls=replace(tls, enforced_min_version=lowest))
    return config


def _tls_config(sec: Section) -> TLSServerConfig:
    for unsupported in (
        "cert",
        "key",
        "client_ca",
        "cipher_suites",
        "curve_preferences",
        "prefer_server_cipher_suites",
        "client_allowed_sans",
    ):
        if unsupported in sec.data:
            raise sec.error(unsupported, _NOT_SUPPORTED)
    cert_file = sec.get("cert_file", str, default="")
    key_file = sec.get("key_file", str, default="")
    if not cert_file:
        raise sec.error("cert_file", "is required when tls_server_config is given")
    if not key_file:
        raise sec.error("key_file", "is required when tls_server_config is given")
    auth = sec.get("client_auth_type", str, default="NoClientCert")
    if auth in _UNVERIFIED_CLIENT_AUTH:
        raise sec.error(
            "client_auth_type",
            f"{auth} (a client certificate that is not verified) is not supported; use RequireAndVerifyClientCert",
        )
    if auth not in CLIENT_AUTH_TYPES:
        raise sec.error("client_auth_type", f"unknown value {auth!r} (one of {', '.join(CLIENT_AUTH_TYPES)})")
    ca = sec.get("client_ca_file", str, default=None)
    if auth != "NoClientCert" and not ca:
        raise sec.error("client_ca_file", f"is required with client_auth_type {auth}")
    if ca and auth == "NoClientCert":
        raise sec.error(
            "client_auth_type",
            "client_ca_file is set but client_auth_type is NoClientCert: set RequireAndVerifyClientCert",
        )
    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        v = sec.get(key, str, default=default)
        if v not in TLS_VERSIONS:
            raise sec.error(key, f"unknown TLS version {v!r} (one of {', '.join(TLS_VERSIONS)})")
        versions[key] = v
    if TLS_VERSIONS[versions["min_version"]] > TLS_VERSIONS[versions["max_version"]]:
        raise sec.error("min_version", "is above max_version")
    sec.reject_unknown()
    return TLSServerConfig(cert_file=cert_file, key_file=key_file, client_auth_type=auth, client_ca_file=ca, **versions)


def _headers(sec: Section) -> dict[str, str]:
    sec.get("http2", bool, default=True)  # HTTP/2 is never served here; the setting is harmless
    headers = sec.section("headers")
    out = {}
    for name in list(headers.data):
        if name not in EXTRA_HEADERS:
            raise headers.error(name, f"this header cannot be configured (one of {', '.join(EXTRA_HEADERS)})")
        value = headers.get(name, str, default="")
        allowed = EXTRA_HEADERS[name]
        if allowed is not None and value and value not in allowed:
            raise headers.error(name, f"expected one of {', '.join(allowed)}, got {value!r}")
        if "\n" in value or "\r" in value:
            raise headers.error(name, "a header value cannot hold a line break")
        if value:
            out[name] = value
    sec.reject_unknown()
    return out


def _users(root: Section) -> dict[str, bytes]:
    users = root.section("basic_auth_users")
    out = {}
    for user in list(users.data):
        if not isinstance(user, str) or not user:
            raise users.error(str(user), "a user name must be a non-empty string")
        if ":" in user:
            raise users.error(user, "a user name cannot contain ':' (basic auth splits on it)")
        hashed = users.get(user)
        match = _BCRYPT_HASH.match(hashed) if isinstance(hashed, str) else None
        if not match or not 4 <= int(match.group(1)) <= 31:
            # The value itself is a secret (or a password pasted by mistake): never echo it.
            raise users.error(user, "expected a bcrypt hash such as $2y$10$... (htpasswd -nBC 10 \"\" | tr -d ':\\n')")
        cost = int(match.group(1))
        if cost > MAX_BCRYPT_COST:
            raise users.error(
                user,
                f"bcrypt cost {cost} is above {MAX_BCRYPT_COST}: every wrong password a client sends would cost "
                f"2^{cost} rounds of CPU (cost 10 takes ~50 ms, 14 ~0.8 s, {cost} "
                f"~{_cost_time(cost)}); hash it again with cost 10 to {MAX_BCRYPT_COST} (htpasswd -nBC 10)",
            )
        out[user] = hashed.encode()
    return out


def _cost_time(cost: int) -> str:
    seconds = 0.05 * 2 ** (cost - 10)
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


#: A hash no user has: unknown users are checked against it, so the answer takes as long as for
#: a known user with a wrong password and does not reveal which user names exist.
#: (Cost 10, as htpasswd -B makes them; the hash of random bytes nobody kept. A constant, so that
#: importing this module costs no bcrypt round.)
_DECOY_HASH = b"$2b$10$mQll/98mrWpmsb7UPDxY2.mnNtjDyJi3hvx4GIgwXTL5fVT1Bgm6i"


class BasicAuth:
    """Checks ``Authorization: Basic`` credentials against bcrypt hashes.

    bcrypt is slow on purpose (cost 10: tens of milliseconds), too slow to pay on every scrape:
    results are cached by a SHA-256 of user, password and hash (never the password itself), for
    a bounded number of pairs, as the exporter-toolkit caches them.
    """

    def __init__(self, users: dict[str, bytes], cache_size: int = 256):
        self.users = users
        self._cache: OrderedDict[bytes, bool] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def check(self, user: str, password: str) -> bool:
        hashed = self.users.get(user)
        known = hashed is not None
        hashed = hashed if hashed is not None else _DECOY_HASH
        key = hashlib.sha256(
            b"\0".join([user.encode("utf-8", "surrogateescape"), password.encode("utf-8", "surrogateescape"), hashed])
        ).digest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is None:
            try:
                cached = bcrypt.checkpw(password.encode("utf-8", "surrogateescape"), hashed)
            except ValueError:  # longer than bcrypt's 72 bytes: no hash can match it
                cached = False
            with self._lock:
                self._cache[key] = cached
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        # hmac.compare_digest keeps the final comparison constant-time as well.
        return known and hmac.compare_digest(b"\1" if cached else b"\0", b"\1")
