"""QueryPerf as plain SOAP over the pyvmomi session: the request written as text, the answer
parsed with lxml straight into samples.

pyvmomi builds a Python object for every element of an answer (a 17-VM CSV answer has ~6,000)
and serializes every MetricId through its type system; at 1,000 VMs that was ~80 % of a
probe's CPU. Login, inventory (PropertyCollector) and counter look-up stay on pyvmomi: they
are rare. The session (cookie, TLS context, connection pool, timeout) is pyvmomi's own stub,
so session expiry is still pyvmomi's ``vim.fault.NotAuthenticated`` and handled by
:meth:`VCenterClient.call`.

A SOAP fault becomes the pyvmomi fault class it names (``NotAuthenticated``,
``ManagedObjectNotFound``, ``InvalidArgument``...) carrying the fault string, so the causes
reported are the same as before; anything that is not a SOAP envelope is a
:class:`~ioparallax.exporters.vcenter.client.TargetError` of kind ``protocol`` quoting the start of it.
"""

from __future__ import annotations

import datetime as dt
import http.client
import time
from collections.abc import Callable, Iterable
from typing import Any
from xml.sax.saxutils import escape

from lxml import etree
from pyVmomi import VmomiSupport

from ioparallax.exporters.vcenter.client import TargetError
from ioparallax.exporters.vcenter.perf import REALTIME_INTERVAL, EntityRequest, ParseResult, Sample, parse_timestamp

SOAPENV = "http://schemas.xmlsoap.org/soap/envelope/"
VIM = "urn:vim25"
XSI_TYPE = "{http://www.w3.org/2001/XMLSchema-instance}type"

_ENVELOPE_START = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    f'<soapenv:Envelope xmlns:soapenv="{SOAPENV}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xmlns:xsd="http://www.w3.org/2001/XMLSchema">'
    f'<soapenv:Body><QueryPerf xmlns="{VIM}"><_this type="PerformanceManager">'
)
_ENVELOPE_END = "</QueryPerf></soapenv:Body></soapenv:Envelope>"

#: No DTDs, no entities, no network: an answer is data, never instructions to the parser.
_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True, remove_comments=True, remove_pis=True
)

_T_BODY = f"{{{SOAPENV}}}Body"
_T_FAULT = f"{{{SOAPENV}}}Fault"
_T_ENTITY = f"{{{VIM}}}entity"
_T_SAMPLE_CSV = f"{{{VIM}}}sampleInfoCSV"
_T_SAMPLE_INFO = f"{{{VIM}}}sampleInfo"
_T_TIMESTAMP = f"{{{VIM}}}timestamp"
_T_INTERVAL = f"{{{VIM}}}interval"
_T_VALUE = f"{{{VIM}}}value"
_T_ID = f"{{{VIM}}}id"
_T_COUNTER = f"{{{VIM}}}counterId"
_T_INSTANCE = f"{{{VIM}}}instance"


def _iso(ts: float) -> str:
    d = dt.datetime.fromtimestamp(ts, dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{d.microsecond:06d}Z" if d.microsecond else "Z")


def query_perf_body(perf_manager: str, requests: Iterable[EntityRequest], keys: list[int], fmt: str) -> bytes:
    """The QueryPerf request for ``requests``: realtime samples after ``since`` (exclusive), or
    only the latest one when nothing has been seen yet. Elements in the WSDL's order."""
    parts = [_ENVELOPE_START, escape(perf_manager), "</_this>"]
    tail = f"<intervalId>{REALTIME_INTERVAL}</intervalId><format>{escape(fmt)}</format></querySpec>"
    for req in requests:
        parts.append(f'<querySpec><entity type="VirtualMachine">{escape(req.moref)}</entity>')
        if req.since is None:
            parts.append("<maxSample>1</maxSample>")
        else:
            parts.append(f"<startTime>{_iso(req.since)}</startTime>")
        for inst in req.instances:
            inst_xml = escape(inst)
            parts.extend(
                f"<metricId><counterId>{k}</counterId><instance>{inst_xml}</instance></metricId>" for k in keys
            )
        parts.append(tail)
    parts.append(_ENVELOPE_END)
    return "".join(parts).encode("utf-8")


def _snippet(body: bytes, n: int = 160) -> str:
    text = body[:n].decode("utf-8", "replace").replace("\n", " ").strip()
    return text + ("..." if len(body) > n else "")


def fault_from(fault: Any) -> Exception:
    """A ``soapenv:Fault`` element -> the pyvmomi fault it names (raised by the caller), or a
    protocol TargetError when it names none that pyvmomi knows."""
    faultstring = (fault.findtext("faultstring") or "").strip()
    detail = fault.find("detail")
    name = ""
    if detail is not None and len(detail):
        first = detail[0]
        name = first.get(XSI_TYPE) or ""
        if ":" in name:
            name = name.split(":", 1)[1]
        if not name and isinstance(first.tag, str):
            name = etree.QName(first).localname.removesuffix("Fault")
    if name:
        try:
            cls = VmomiSupport.GetWsdlType(VIM, name)
        except KeyError:
            cls = None
        if cls is not None and isinstance(cls, type) and issubclass(cls, Exception):
            return cls(msg=faultstring)  # type: ignore[call-arg]  # pyVmomi's faults take msg=
    code = (fault.findtext("faultcode") or "").strip() or "no faultcode"
    what = f"{name}: " if name else ""
    return TargetError(f"QueryPerf SOAP fault ({code}) {what}{faultstring or 'no faultstring'}".rstrip(), "protocol")


def soap_response(body: bytes, status: int, method: str) -> Any:
    """The response element of a SOAP answer to ``method`` (named in the errors): a SOAP fault is
    raised as the pyvmomi fault it names; anything else malformed as TargetError("protocol")."""
    try:
        root = etree.fromstring(body, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise TargetError(
            f"{method} answer (HTTP {status}) is not XML ({exc.msg}): {_snippet(body)!r}", "protocol"
        ) from None
    soap_body = root.find(_T_BODY)
    if soap_body is None or not len(soap_body):
        raise TargetError(f"{method} answer (HTTP {status}) is not a SOAP envelope: {_snippet(body)!r}", "protocol")
    response = soap_body[0]
    if response.tag == _T_FAULT:
        raise fault_from(response)
    if status != 200:
        raise TargetError(f"{method} answer has HTTP status {status} without a SOAP fault", "protocol")
    return response


def parse_query_perf(body: bytes, key_names: dict[int, str], status: int = 200) -> ParseResult:
    """QueryPerf's answer (CSV or normal format) -> samples per VM and instance, ascending.

    The same rules as before: newest-first answers reordered, values below 0 (vCenter's "no
    data") left out, a series whose value count differs from the sample count left out and
    counted (stock vcsim drops zeros on the wire), ``*`` echoed back recorded. A SOAP fault is
    raised as the pyvmomi fault it names; anything else malformed as TargetError("protocol").
    """
    response = soap_response(body, status, "QueryPerf")

    out = ParseResult()
    samples_out = out.samples
    for metric in response:
        moref = None
        csv = None
        infos_normal: list[tuple[str | None, str | None]] = []
        series_list = []
        # One pass over the result's children (lxml's find() goes through ElementPath in
        # Python and cost ~10x more than the whole parse).
        for child in metric:
            tag = child.tag
            if tag == _T_VALUE:
                series_list.append(child)
            elif tag == _T_ENTITY:
                moref = (child.text or "").strip()
            elif tag == _T_SAMPLE_CSV:
                csv = child.text or ""
            elif tag == _T_SAMPLE_INFO:
                ts = iv = None
                for part in child:
                    if part.tag == _T_TIMESTAMP:
                        ts = part.text
                    elif part.tag == _T_INTERVAL:
                        iv = part.text
                infos_normal.append((ts, iv))
        if not moref:
            raise TargetError("QueryPerf answer has a result without an entity", "protocol")
        try:
            if csv is not None:
                is_csv = True
                parts = csv.split(",") if csv else []
                infos = [(parse_timestamp(parts[i + 1]), int(parts[i])) for i in range(0, len(parts) - 1, 2)]
            else:
                is_csv = False
                infos = [(parse_timestamp(ts), int(iv)) for ts, iv in infos_normal]  # type: ignore[arg-type]
        except (TypeError, ValueError, IndexError, AttributeError) as exc:
            raise TargetError(f"QueryPerf answer for {moref} has unreadable sample info ({exc})", "protocol") from None
        n = len(infos)
        order = sorted(range(n), key=lambda i: infos[i][0])
        ascending = order == list(range(n))
        per_instance = samples_out.setdefault(moref, {})
        for series in series_list:
            counter = instance = None
            texts = []
            for part in series:
                tag = part.tag
                if tag == _T_VALUE:
                    texts.append(part.text)
                elif tag == _T_ID:
                    for field in part:
                        if field.tag == _T_COUNTER:
                            counter = field.text
                        elif field.tag == _T_INSTANCE:
                            instance = field.text
            try:
                name = key_names.get(int(counter))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
            if name is None:
                out.unread += 1  # a counter not asked for: counted, never read
                continue
            instance = instance or ""
            if instance == "*":
                out.star_echoed.add(moref)
                continue
            try:
                if is_csv:
                    text = texts[0] if texts else None
                    values = [int(v) for v in text.split(",")] if text else []
                else:
                    values = [int(v) for v in texts]
            except (TypeError, ValueError) as exc:
                raise TargetError(
                    f"QueryPerf answer for {moref} {instance} has a non-integer value ({exc})", "protocol"
                ) from None
            if not values:
                out.empty += 1
                continue
            if len(values) != n:
                # Zeros dropped on the wire (stock vcsim): positions are unknowable. Reporting
                # shifted values would be wrong, so the series is left out and counted.
                out.misaligned += 1
                continue
            samples = per_instance.get(instance)
            if samples is None:
                samples = per_instance[instance] = [Sample(infos[i][0], infos[i][1]) for i in order]
            if ascending:
                for s, v in zip(samples, values):
                    if v >= 0:
                        s.values[name] = v
            else:
                for s, i in zip(samples, order):
                    v = values[i]
                    if v >= 0:
                        s.values[name] = v
    return out


#: Set by ``vcenter-exporter capture`` (capture.py) while it runs: called with (method, request,
#: HTTP status, answer, seconds) for every answer ``post`` reads. None in the exporter.
RECORDER: Callable[[str, bytes, int, bytes, float], None] | None = None


def post(si: Any, body: bytes, method: str = "QueryPerf") -> tuple[int, bytes]:
    """POST a SOAP request on the session's own connection pool (same TLS context, timeout and
    cookie as pyvmomi's calls); (HTTP status, body) for 200 and 500 (a fault)."""
    stub = si._stub
    conn = stub.GetConnection()
    started = time.monotonic()
    try:
        conn.request(
            "POST",
            stub.path,
            body,
            {
                "Cookie": stub.cookie,
                "SOAPAction": stub.versionId,
                "Content-Type": "text/xml; charset=UTF-8",
                "User-Agent": "ioparallax-vcenter-exporter",
            },
        )
        resp = conn.getresponse()
        data = resp.read()
    except (OSError, http.client.HTTPException):
        conn.close()
        stub.DropConnections()  # the server may be sick: no cached connection is reused
        raise
    if RECORDER is not None:
        RECORDER(method, body, resp.status, data, time.monotonic() - started)
    cookie = resp.getheader("Set-Cookie")
    if cookie:
        stub.cookie = cookie
    if resp.status not in (200, 500):
        conn.close()
        raise TargetError(f"{method} got HTTP {resp.status} {resp.reason}: {_snippet(data)!r}", "protocol")
    if resp.will_close:
        conn.close()
    else:
        stub.ReturnConnection(conn)
    return resp.status, data


def query_perf(
    si: Any, perf_manager: str, requests: list[EntityRequest], keys: list[int], key_names: dict[int, str], fmt: str
) -> ParseResult:
    """One QueryPerf round trip for ``requests``, parsed."""
    status, data = post(si, query_perf_body(perf_manager, requests, keys, fmt))
    return parse_query_perf(data, key_names, status)
