"""--compare: which VM disk of the other side (B) is which of the report's (A).

Two sides of a comparison name their VM disks alike when they run the same test plan, but not
always with the same words: vCenter's instance is ``scsi0:1`` and Prism's disk address ``scsi.1``
for the same position of a disk in the VM. A B disk pairs with an A disk, in this order:

1. the pairs file (``--compare-pairs``, YAML: ``"<A vm> <A disk>": "<B vm> <B disk>"``), for VMs
   or disks named differently on the two sides;
2. the same VM name and the same disk address, where an address on the first controller of a bus
   (``scsi0:1``, ``sata0:2``) and Prism's ``scsi.1``, ``sata.2`` are one address;
3. none: the disk is shown on its own side only.

:func:`remap` renames the paired B disks in B's dataset to A's names, so every figure and table of
the report overlays them without knowing about pairs; the compare table names both.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ioparallax.report.data import Dataset, Key
from ioparallax.yamlconf import ConfigError, load_yaml

_FIRST_CONTROLLER = re.compile(r"([a-z]+)0:([0-9]+)")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=|!=|=~|!~)\s*"((?:[^"\\]|\\.)*)"\s*')


def disk_address(disk: str) -> str:
    """One spelling for a disk's position: ``scsi0:1`` (vCenter) and ``scsi.1`` (Prism) -> ``scsi.1``;
    other controllers (``scsi1:0``) stay as they are (AHV has one controller per bus)."""
    m = _FIRST_CONTROLLER.fullmatch(disk)
    return f"{m.group(1)}.{m.group(2)}" if m else disk


def load_pairs(path: str | os.PathLike[str]) -> dict[Key, Key]:
    """A pairs file: ``{"oltp-01 scsi0:1": "oltp-01-ahv scsi.1"}`` -> {A key: B key}; errors name the
    file and the key."""
    data: Any = load_yaml(path, regular_only=True)  # a FIFO named here blocked the report for ever
    if not isinstance(data, dict):
        raise ConfigError(path, None, 'expected a mapping of "<A vm> <A disk>" to "<B vm> <B disk>"')
    out: dict[Key, Key] = {}
    for a, b in data.items():
        ka, kb = _key(a), _key(b)
        if ka is None:
            raise ConfigError(path, str(a), 'expected "<vm> <disk>", e.g. "oltp-01 scsi0:1"')
        if kb is None:
            raise ConfigError(path, str(a), f'expected "<vm> <disk>" as the B disk, got {b!r}')
        if kb in out.values():
            raise ConfigError(path, str(a), f"B disk {b!r} is paired twice")
        out[ka] = kb
    return out


def _key(text: Any) -> Key | None:
    if not isinstance(text, str):
        return None
    vm, _, disk = text.strip().rpartition(" ")
    return (vm.strip(), disk) if vm.strip() and disk else None


def pair(a_keys: list[Key], b_keys: list[Key], pairs: dict[Key, Key] | None = None) -> dict[Key, Key]:
    """{B key: A key} of every B disk that pairs with an A disk (see the module's rules)."""
    out: dict[Key, Key] = {}
    taken: set[Key] = set()
    b_set = set(b_keys)
    for a, b in (pairs or {}).items():
        if b in b_set and a not in taken:
            out[b] = a
            taken.add(a)
    by_address: dict[tuple[str, str], Key] = {}
    for a in a_keys:
        if a not in taken:
            by_address.setdefault((a[0], disk_address(a[1])), a)
    for b in b_keys:
        if b in out:
            continue
        found = by_address.get((b[0], disk_address(b[1])))
        if found is not None and found not in taken:
            out[b] = found
            taken.add(found)
    return out


def remap(ds: Dataset, b_to_a: dict[Key, Key]) -> None:
    """Rename B's paired disks to their A names in B's dataset (in place)."""
    renames = {b: a for b, a in b_to_a.items() if a != b}
    if not renames:
        return

    def rename(table: dict[Key, Any]) -> dict[Key, Any]:
        return {renames.get(k, k): v for k, v in table.items()}

    ds.series = {fam: rename(per_disk) for fam, per_disk in ds.series.items()}
    ds.vdisk_of = rename(ds.vdisk_of)
    ds.vm_source_of = rename(ds.vm_source_of)
    labels = [m for rows in ds.labelled.values() for m, _ in rows]
    labels += [r["metric"] for rows in ds.instant.values() for r in rows]  # identity chain, sources
    for m in labels:
        k = (m.get("vm", ""), m.get("disk", ""))
        if k in renames:
            m["vm"], m["disk"] = renames[k]


def split_matchers(text: str) -> list[tuple[str, str]]:
    """``a="x",b=~"y"`` (braces optional) -> [("a", 'a="x"'), ("b", 'b=~"y"')]; ValueError if it
    is not a list of label matchers."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if not m:
            raise ValueError(f'expected label matchers such as {{cluster="ahv"}}, got {text!r}')
        out.append((m.group(1), f'{m.group(1)}{m.group(2)}"{m.group(3)}"'))
        pos = m.end()
        if pos < len(body):
            if body[pos] != ",":
                raise ValueError(f'expected label matchers such as {{cluster="ahv"}}, got {text!r}')
            pos += 1
    return out


def merge_matchers(a: str, b: str) -> str:
    """B's matchers: A's (``--match``) with those on the labels B names replaced by B's, so
    ``--match 'cluster="esxi",vm=~"oltp.*"'`` and ``B={cluster="ahv"}`` give
    ``vm=~"oltp.*",cluster="ahv"``."""
    mine = split_matchers(b)
    names = {n for n, _ in mine}
    kept = [m for n, m in split_matchers(a) if n not in names] if a.strip() else []
    return ",".join(kept + [m for _, m in mine])
