"""Writes fixtures/built-lab-host.csv: an esxtop batch CSV BUILT in the documented layout
(docs/esxtop.md; /work/shared/reference/app-cpu-esxtop.md), not captured from a host: no public
capture with the device latency split was found (fixtures/README.md). The counter names are
esxtop's; the values are chosen so the split adds up (guest = kernel + driver, queue within
kernel) and the tests can state them. Run: python tests/exporters/esxtop/make_fixtures.py
"""

from __future__ import annotations

from pathlib import Path

from ioparallax.simulators.esxtop import VDISK_COUNTERS  # the columns esxtop writes per virtual disk

HOST = "esx01.lab.local"
OUT = Path(__file__).parent / "fixtures" / "built-lab-host.csv"
TIMES = ["11/28/2026 10:00:00", "11/28/2026 10:00:02", "11/28/2026 10:00:04"]

# (instance, values per row for VDISK_COUNTERS)
VDISKS = {
    "app-01": [[300, 200, 100, 6.25, 3.25, 0.5, 1.5]] * 3,  # the VM's row: its disks summed
    "app-01:scsi0:0": [
        [300, 200, 100, 6.25, 3.25, 0.5, 1.5],
        [60, 40, 20, 1.25, 0.75, 0.4, 1.2],
        [3000, 2000, 1000, 62.5, 31.25, 8.0, 20.0],
    ],
    "app-01:scsi0:1": [[0, 0, 0, 0, 0, 0, 0]] * 3,
    "NTNX-BLK1-A-CVM:scsi0:0": [[10, 2, 8, 0.01, 0.1, 0.3, 0.6]] * 3,
    "db,01 (test):scsi1:0": [[50, 50, 0, 0.4, 0, 2.0, 0]] * 3,
}
LAYERS = ["Guest", "Kernel", "Driver", "Queue"]
OPS = ["Command", "Read", "Write"]
STORAGE_COUNTERS = (
    ["Commands/sec", "Reads/sec", "Writes/sec", "MBytes Read/sec", "MBytes Written/sec"]
    + [f"Average {layer} MilliSec/{op}" for layer in LAYERS for op in OPS]
    + ["Device Q Depth", "Active Commands", "Queued Commands"]
)


def split(
    rates: list[float], kernel: list[float], driver: list[float], queue: list[float], depth: list[float]
) -> list[float]:
    guest = [k + d for k, d in zip(kernel, driver)]
    return rates + guest + kernel + driver + queue + depth


# per row: rates (cmd, r, w, MB r, MB w), kernel/driver/queue (cmd, read, write), (depth, active, queued)
DEVICE = [
    split([1200, 800, 400, 25.0, 12.5], [0.5, 0.3, 0.9], [2.0, 1.7, 2.6], [0.2, 0.1, 0.4], [64, 3, 0]),
    split([1500, 1000, 500, 31.25, 15.5], [0.25, 0.25, 0.25], [1.0, 0.75, 1.5], [0.0, 0.0, 0.0], [64, 2, 0]),
    split([6000, 4000, 2000, 125.0, 62.5], [12.0, 10.0, 16.0], [3.0, 2.5, 4.0], [11.0, 9.0, 15.0], [64, 64, 120]),
]
STORAGE = {
    "Physical Disk SCSI Device(naa.6000c29a5e3b2f1d0c9b8a7f6e5d4c3b)": DEVICE,
    "Physical Disk Path(vmhba1:C0:T0:L0)": DEVICE,
    "Physical Disk Adapter(vmhba1)": [row[:17] + [0, row[18], row[19]] for row in DEVICE],
}
NFS_COUNTERS = ["Commands/sec", "Reads/sec", "Writes/sec", "MBytes Read/sec", "MBytes Written/sec"] + [
    f"Average Guest MilliSec/{op}" for op in OPS
]
NFS = {"ctr-poc-01": [[500, 300, 200, 9.5, 6.25, 1.2, 1.0, 1.5]] * 3}
GROUP_COUNTERS = ["% Used", "% Run", "% Ready", "% CoStop", "% Wait"]
GROUPS = {
    "1:system": [[5, 5, 0, 0, 95]] * 3,
    "2099979:app-01": [[150, 140, 2.5, 0.5, 250], [160, 150, 30.0, 4.0, 240], [150, 140, 2.5, 0.5, 250]],
    "2100010:NTNX-BLK1-A-CVM": [[420, 400, 12.0, 0.0, 380]] * 3,
    "2100020:db,01 (test)": [[50, 50, 1.0, 0.0, 150]] * 3,
}
NOISE = ["Memory\\Machine MBytes", "Physical Cpu(0)\\% Processor Time", "Physical Cpu Load\\Cpu Load (1 Minute Avg)"]


def main() -> None:
    cols: list[str] = ["(PDH-CSV 4.0) (UTC)(0)"]
    rows: list[list[str]] = [[t] for t in TIMES]

    def add(name: str, per_row: list[float]) -> None:
        cols.append(f"\\\\{HOST}\\{name}")
        for r, v in zip(rows, per_row):
            r.append(f"{v:.2f}")

    for n in NOISE:
        add(n, [1024, 12.5, 0.3])
    # (object name of an instance, {instance: values per row}, the counters of those values)
    tables = (
        ("Virtual Disk({})", VDISKS, VDISK_COUNTERS),
        ("{}", STORAGE, STORAGE_COUNTERS),
        ("Physical Disk NFS Volume({})", NFS, NFS_COUNTERS),
        ("Group Cpu({})", GROUPS, GROUP_COUNTERS),
    )
    for obj, table, counters in tables:
        for inst, vals in table.items():
            for i, c in enumerate(counters):
                add(f"{obj.format(inst)}\\{c}", [row[i] for row in vals])
    with OUT.open("w", newline="") as fh:
        for line in [cols, *rows]:
            fh.write(",".join(f'"{c}"' for c in line) + "\r\n")


if __name__ == "__main__":
    main()
