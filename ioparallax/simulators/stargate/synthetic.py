"""A generated scenario with N vdisks hosted on one CVM (the 1,000-vdisk benchmark), or spread over
M generated CVMs (the cluster-scale benchmark)."""

from __future__ import annotations

from ioparallax.simulators.scenario.model import Scenario, parse_scenario

# A few stream shapes, cycled over the vdisks so the pages are not all alike.
TEMPLATES: tuple[dict, ...] = (
    {
        "read_iops": 2000,
        "write_iops": 1000,
        "size": "4KiB",
        "random": 1.0,
        "read_latency": "400us",
        "write_latency": "4.2ms",
        "working_set": "200GiB",
    },
    {
        "read_iops": 0,
        "write_iops": 200,
        "size": "1MiB",
        "write_random": 0.0,
        "write_latency": "19ms",
        "working_set": "40GiB",
    },
    {
        "read_iops": 900,
        "write_iops": 600,
        "size": "8KiB",
        "zero_reads": 0.357,
        "zero_writes": 0.4,
        "read_latency": "250us",
        "write_latency": "600us",
        "working_set": "100GiB",
    },
    {
        "read_iops": 0,
        "write_iops": 600,
        "write_size": "16k/60:32k/40",
        "write_random": 0.05,
        "write_latency": "700us",
        "working_set": "2GiB",
    },
    {"read_iops": 4000, "write_iops": 0, "size": "4KiB", "read_latency": "40us", "working_set": "8GiB"},
)


def synthetic_scenario(
    vdisks: int,
    *,
    cvms: tuple[str, ...] = ("cvm-1", "cvm-2", "cvm-3"),
    page_build: int = 2016,
    period: int = 60,
    hybrid: bool = False,
    cvm_count: int | None = None,
) -> Scenario:
    """``vdisks`` single-disk VMs, all hosted by the first CVM, with a short period so the trace
    compiles quickly. With ``cvm_count``, the cluster is ``cvm-1`` .. ``cvm-<cvm_count>`` and the
    vdisks are dealt round-robin over them (vdisk i on CVM i mod cvm_count)."""
    if vdisks < 1:
        raise ValueError("need at least one synthetic vdisk")
    spread = cvm_count is not None
    if cvm_count is not None:
        if not 1 <= cvm_count <= 256:
            raise ValueError(f"synthetic CVMs: 1 to 256, got {cvm_count}")
        cvms = tuple(f"cvm-{i + 1}" for i in range(cvm_count))
    vms = []
    for i in range(vdisks):
        stream = dict(TEMPLATES[i % len(TEMPLATES)], name="synth")
        vms.append(
            {
                "name": f"synth-{i + 1:04d}",
                "disks": [
                    {
                        "unit": "scsi0:1",
                        "guest_device": "sdb",
                        "cvm": cvms[i % len(cvms) if spread else 0],
                        "streams": [stream],
                    }
                ],
            }
        )
    data = {
        "name": f"synthetic-{vdisks}",
        "summary": f"{vdisks} synthetic vdisks " + (f"over {len(cvms)} CVMs" if spread else f"hosted by {cvms[0]}"),
        "period": f"{period}s",
        "cluster": {"name": "synthetic", "cvms": list(cvms), "page_build": page_build, "hybrid": hybrid},
        "vms": vms,
    }
    return parse_scenario(data, f"<synthetic {vdisks} vdisks>")
