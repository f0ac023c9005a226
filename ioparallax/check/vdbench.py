"""vdbench parameter files as hygiene input (a parmfile before the run, or the ``parmfile.html``
of an output directory), judged by vdbench-exporter's own rules
(ioparallax.exporters.vdbench.hygiene).

Before the run no flatfile exists: the working set is known only from ``size=`` on the ``sd=``
lines (a whole LUN's size is vdbench's to find out); without one, with a cache size given, the
check says "cannot tell".
"""

from __future__ import annotations

import re

from ioparallax.exporters.vdbench.hygiene import HygieneConfig, parmfile_findings, working_set_bytes
from ioparallax.exporters.vdbench.parse import Parmfile, parse_parmfile

_DEFINITION = re.compile(r"^\s*(sd|wd|rd|fsd|fwd)\s*=", re.IGNORECASE | re.MULTILINE)


class ParmfileError(ValueError):
    """Not a vdbench parameter file."""


def looks_like_parmfile(path: str, text: str) -> bool:
    """A parmfile by name (parmfile.html, *.parm, *.vdb) or by its ``sd=``/``wd=``/``rd=`` lines."""
    if path.endswith(("parmfile.html", ".parm", ".vdb", ".vdbench")):
        return True
    kinds = {m.group(1).lower() for m in _DEFINITION.finditer(text)}
    return {"wd", "rd"} <= kinds or {"fwd", "rd"} <= kinds


def parse(text: str) -> Parmfile:
    pf = parse_parmfile(text)
    if not pf.rd:
        raise ParmfileError("no rd= line: not a vdbench parameter file (or nothing would run)")
    return pf


def findings(pf: Parmfile, config: HygieneConfig) -> list[tuple[str, str, bool, str]]:
    """(definition, problem, is a trap (else cannot tell), detail) for a parameter file."""
    out = [(f.where, f.problem, True, f.detail) for f in parmfile_findings(pf, config)]
    if config.cache_size_bytes:
        for rd in pf.rd:
            if working_set_bytes(pf, rd) is None:
                out.append(
                    (
                        f"rd={rd}",
                        "working_set_below_cache",
                        False,
                        "no size= on its sd= lines: the LUN sizes are known only once vdbench runs "
                        "(vdbench-exporter checks them from the flatfile's lunsize)",
                    )
                )
    return out
