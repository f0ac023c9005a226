"""The scalability section on synthetic report data: the ramp found from the guest's running jobs,
each view fitted, views that differ drawn apart, --steps, and no section without a ramp."""

from __future__ import annotations

import numpy as np
import pytest

from ioparallax.mixin.config import load_config
from ioparallax.report import ramps, scaling, scaling_section, usl
from ioparallax.report.context import ReportContext
from ioparallax.report.data import Dataset
from ioparallax.report.promapi import PromAPI
from ioparallax.report.sections import Section

T0 = 1_800_000_000.0
STEP = 2.0
STEP_S = 120
SIGMA, KAPPA, GAMMA = 0.05, 0.02, 5000.0


def lagged(x: np.ndarray, points: int) -> np.ndarray:
    """A trailing moving mean over ``points`` samples (the rules' 1m rate at a 2 s step)."""
    pad = np.concatenate([np.full(points - 1, x[0]), x])
    return np.convolve(pad, np.ones(points) / points, mode="valid")


def ramp_dataset(
    vms: int = 8, storage_scale: float = 1.0, guest: bool = True, noise: float = 0.01, seed: int = 1
) -> Dataset:
    """VM k (1-based) runs from (k - 1) * 120 s; totals follow the USL; each view's rate lags 1m."""
    rng = np.random.default_rng(seed)
    times = T0 + STEP * np.arange(int(vms * STEP_S / STEP))
    rel = times - T0
    running = np.minimum(vms, rel // STEP_S + 1)
    per_vm = GAMMA / (1 + SIGMA * (running - 1) + KAPPA * running * (running - 1))
    ds = Dataset(times=times)
    for fam in (
        "iodepth",
        "guest_read_ops",
        "guest_write_ops",
        "vm_read_ops",
        "vm_write_ops",
        "storage_read_ops",
        "storage_write_ops",
        "guest_read_latency_seconds",
        "guest_write_latency_seconds",
        "vm_read_latency_seconds",
        "vm_write_latency_seconds",
        "storage_read_latency_seconds",
        "storage_write_latency_seconds",
    ):
        ds.series[fam] = {}
    for k in range(1, vms + 1):
        key = (f"web-{k:02d}", "scsi0:1")
        on = rel >= (k - 1) * STEP_S
        ops = np.where(on, per_vm, 0.0) * (1 + rng.normal(0, noise, times.size))
        if guest:
            ds.series["iodepth"][key] = np.where(on, 4.0, np.nan)
        for view, scale in (("guest", 1.0), ("vm", 1.0), ("storage", storage_scale)):
            if view == "guest" and not guest:
                continue
            r = lagged(ops * 0.7 * scale, 30)
            w = lagged(ops * 0.3 * scale, 30)
            ds.series[f"{view}_read_ops"][key] = np.where(on | (rel >= (k - 1) * STEP_S), r, np.nan)
            ds.series[f"{view}_write_ops"][key] = np.where(on, w, np.nan)
            lat = lagged(4.0 / per_vm, 30)  # closed loop at QD4: 4 in flight per VM
            for d in ("read", "write"):
                ds.series[f"{view}_{d}_latency_seconds"][key] = np.where(on, lat, np.nan)
    return ds


def context(ds: Dataset) -> ReportContext:
    return ReportContext(
        api=PromAPI("http://127.0.0.1:9"),
        start=float(ds.times[0]),
        end=float(ds.times[-1]),
        step=STEP,
        config=load_config(),
    )


def ramp(ds: Dataset, steps: list[ramps.Step] | None = None) -> scaling.Scaling | None:
    """The analysis of the dataset's ramp, as the report makes it (report.make_report)."""
    return scaling.scaling(context(ds), ds, steps)


def section(ds: Dataset) -> Section | None:
    """The section of the dataset's ramp, as the report's builder makes it (builders.report_builders)."""
    return scaling_section.scaling_section(context(ds), ramp(ds))


def test_ramp_of_vms_recovers_sigma_and_kappa_in_every_view():
    s = ramp(ramp_dataset())
    assert s is not None and s.what == "VMs" and s.source.startswith("VMs running fio jobs")
    assert [round(p.concurrency) for p in s.plateaus] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert s.settle == 60 + 20 + STEP
    assert s.primary == "guest" and s.differ == []
    for view in ("guest", "vm", "storage"):
        f = s.views[view].fit
        assert f.ok, f.statement
        assert f.sigma.value == pytest.approx(SIGMA, rel=0.1)
        assert f.kappa.value == pytest.approx(KAPPA, rel=0.1)
        assert f.peak_n == pytest.approx(np.sqrt((1 - SIGMA) / KAPPA), rel=0.05)


def test_a_view_that_begins_inside_the_range_is_judged_once_its_windows_filled():
    # The VM view's series begins 10 s into the range (its exporter's first samples) and its rate
    # reads half the truth until its window has filled, 80 s later: the first plateau (settled from
    # the concurrency's start, 82 s) would hold those points; they are dropped for that view only.
    ds = ramp_dataset(noise=0.0)
    late = ds.times - T0 < 10
    young = (ds.times - T0 >= 10) & (ds.times - T0 < 10 + 80)
    for fam in ("vm_read_ops", "vm_write_ops"):
        for x in ds.series[fam].values():
            x[late] = np.nan
            x[young] *= 0.5
    s = ramp(ds)
    assert s is not None and [round(p.concurrency) for p in s.plateaus][:2] == [1, 2]
    first = s.plateaus[0]
    assert first.start < T0 + 10 + s.settle  # the plateau itself starts before the VM view settled
    for view in ("guest", "vm", "storage"):
        assert s.views[view].throughput[0] == pytest.approx(GAMMA, rel=1e-6), view
        assert s.views[view].fit.sigma.value == pytest.approx(SIGMA, rel=0.01), view


def test_section_has_the_sentence_tables_and_a_figure_with_data():
    sec = section(ramp_dataset())
    assert sec.id == "scalability" and sec.page_break
    assert "<b>guest (fio):</b> Throughput at 8 VMs is" in sec.html
    assert "peaked at about 16," in sec.html
    assert "The VM (vCenter) and storage (Stargate) views measured the same plateaus" in sec.html
    assert sec.html.count("<tr><td>") == 8  # one plateau row per step
    [fig] = sec.figures
    assert fig.svg.startswith("<svg") and fig.svg.count("<path") > 50
    assert fig.csv.startswith("view,kind,concurrency,iops,std\nguest,plateau,1,")
    assert "vm_disk:ioparallax_guest_read_ops:rate1m" in fig.promql
    plateaus = sec.csv["scalability-plateaus.csv"].splitlines()
    assert plateaus[0].startswith("concurrency,start_unix,end_unix,settled_seconds,guest_iops_mean")
    assert len(plateaus) == 9


def test_a_view_that_differs_is_fitted_and_drawn_apart():
    s = ramp(ramp_dataset(storage_scale=0.8))
    assert s.differ == ["storage"]
    sec = section(ramp_dataset(storage_scale=0.8))
    assert "<b>storage (Stargate) differs</b> by more than 5%" in sec.html
    csv = sec.figures[0].csv
    assert csv.count("storage,plateau,") == 8 and csv.count("storage,fit,") == 30
    assert csv.count("vm,plateau,") == 0  # the VM view agrees: not drawn again


def test_without_a_guest_view_the_vms_with_io_in_vcenter_count():
    s = ramp(ramp_dataset(guest=False))
    assert s.source.startswith("VMs with I/O in the VM view")
    assert s.primary == "vm"
    assert s.views["vm"].fit.kappa.value == pytest.approx(KAPPA, rel=0.1)


def test_too_short_a_ramp_says_so_instead_of_a_curve():
    sec = section(ramp_dataset(vms=3))
    assert "No scalability fit: 3 concurrency levels measured, at least 4 are needed" in sec.html
    [fig] = sec.figures  # the points, and no curve through them
    assert fig.csv.count("guest,plateau,") == 3 and ",fit," not in fig.csv


@pytest.mark.parametrize("vms", [1, 2])
def test_no_ramp_no_section(vms):
    # One level is a steady workload; two are a job that starts and stops (noisy-neighbour), not a ramp.
    assert section(ramp_dataset(vms=vms)) is None


def test_given_steps_replace_the_detection():
    ds = ramp_dataset()
    steps = ramps.parse_steps(",".join(f"{k * STEP_S}s" for k in range(8)))
    s = ramp(ds, steps)
    assert s.given_steps and s.source.startswith("steps given with --steps")
    assert [round(p.concurrency) for p in s.plateaus] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert s.views["guest"].fit.sigma.value == pytest.approx(SIGMA, rel=0.1)


def test_the_plateau_means_are_the_settled_totals_and_in_flight_follows_littles_law():
    s = ramp(ramp_dataset(noise=0.0))
    for p, x, q in zip(s.plateaus, s.views["guest"].throughput, s.views["vm"].in_flight):
        n = round(p.concurrency)
        assert x == pytest.approx(float(usl.usl(np.array([n]), SIGMA, KAPPA, GAMMA)[0]), rel=1e-9)
        assert q == pytest.approx(4 * n, rel=1e-9)  # QD4 per VM: 4 N in flight
    sec = section(ramp_dataset(noise=0.0))
    assert "<th>in flight, VM</th>" in sec.html
    assert sec.csv["scalability-plateaus.csv"].splitlines()[3].endswith(",12")  # 3 VMs: 12 in flight


def test_report_cli_refuses_bad_steps_before_querying(tmp_path, capsys):
    from ioparallax.report import cli

    rc = cli.main(["--prometheus", "http://127.0.0.1:9", "--steps", "0,3m,x", "-o", str(tmp_path / "r.html")])
    assert rc == 2
    assert "--steps: expected OFFSET or OFFSET=CONCURRENCY (e.g. 3m=2), got 'x'" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def density_dataset(tps_per_io: float = 0.5, cvm_shares: dict[str, float] | None = None) -> Dataset:
    """db-density's law (ioparallax/simulators/scenario/scenarios/db-density.yaml): VM k joins at
    (k - 1) x 120 s, each VM does 2,000 x (1 - (N - 1) / 70) IO/s with N running, its pgbench one
    transaction per 2 I/Os; the application view's rate lags 1m like the I/O views'. The CVMs'
    share of their hosts' CPU as the CPU rules record it (host:, hosts:)."""
    ds = ramp_dataset(noise=0.0)  # the I/O views of a ramp, replaced below by db-density's law
    rel = ds.times - T0
    running = np.minimum(8, rel // STEP_S + 1)
    per_vm = 2000.0 * (1 - (running - 1) / 70)
    ds.series["app_transactions"] = {}
    for k in range(1, 9):
        vm, on = f"web-{k:02d}", rel >= (k - 1) * STEP_S
        ops = np.where(on, per_vm, 0.0)
        for view in ("guest", "vm", "storage"):
            ds.series[f"{view}_read_ops"][(vm, "scsi0:1")] = np.where(on, lagged(ops * 0.7, 30), np.nan)
            ds.series[f"{view}_write_ops"][(vm, "scsi0:1")] = np.where(on, lagged(ops * 0.3, 30), np.nan)
        ds.series["app_transactions"][(vm, "pgbench")] = np.where(on, lagged(ops * tps_per_io, 30), np.nan)
    shares = cvm_shares or {"esx-01": 0.05, "esx-02": 0.05, "esx-03": 0.05, "esx-04": 0.05}
    ds.labelled["cvm_share"] = [({"host": h}, np.full(ds.times.size, v)) for h, v in shares.items()]
    ds.labelled["cvm_share_hosts"] = [({}, np.full(ds.times.size, float(np.mean(list(shares.values())))))]
    return ds


def test_the_application_is_the_control_fitted_first_with_its_density_line():
    s = ramp(density_dataset())
    assert s.primary == "app" and s.io_primary == "guest" and s.differ == []
    assert s.source.startswith("VMs whose application completes transactions")
    assert [round(p.concurrency) for p in s.plateaus] == [1, 2, 3, 4, 5, 6, 7, 8]
    # Each plateau's application total is N x 1,000 x (1 - (N - 1) / 70) transactions/s (settled: exact).
    for p, x in zip(s.plateaus, s.views["app"].throughput):
        n = round(p.concurrency)
        assert x == pytest.approx(n * 1000 * (1 - (n - 1) / 70), rel=1e-9)
    d = s.density
    assert (d.n_max, d.per_vm_source, d.apps) == (8, "measured with 1 VM", ("pgbench",))
    assert d.total == pytest.approx(7200) and d.per_vm == pytest.approx(1000)
    assert d.linear_share == pytest.approx(0.90)
    # 1 - (N - 1) / 70 falls a little faster than 1 / (1 + sigma (N - 1)): the fit finds some coherency
    # and so a peak, far beyond the 8 VMs measured; gamma is one VM's 1,000.
    f = s.views["app"].fit
    assert f.gamma.value == pytest.approx(1000, rel=0.001) and f.linear_share == pytest.approx(0.90, abs=0.001)
    assert 0 < f.kappa.value < f.sigma.value / 10
    assert (d.peak_n, d.peak_x) == (f.peak_n, f.peak_x) and d.peak_n > 16
    # The I/O views: twice the application's (2 I/Os per transaction), the same shape.
    assert s.views["guest"].throughput[-1] == pytest.approx(14400)


def test_the_section_leads_with_the_application_the_io_views_beside_it():
    sec = scaling_section.scaling_section(context(density_dataset()), ramp(density_dataset()))
    html = sec.html
    lead = html.index("<b>application (pgbench):</b> Throughput at 8 VMs is 90 % of linear")
    density = html.index(
        "<b>Density:</b> 8 VMs together completed 7,200 transactions/s, 90.0 % of linear "
        "(8 x 1,000 transactions/s, one VM&#x27;s, measured with 1 VM); the fit predicts a peak of 22,300 "
    )
    cvm = html.index("<b>CVM overhead:</b> the CVMs used 5.0 %")
    beside = html.index("Beside it, the storage as the I/O views saw it: <b>guest (fio):</b> Throughput at 8 VMs is")
    assert lead < density < cvm < beside
    assert "The VM (vCenter) and storage (Stargate) views measured the same plateaus as the guest (fio) view" in html
    assert "<th>application (pgbench) transactions/s</th>" in html and "<th>in flight, application</th>" not in html
    assert "<td>1,000 transactions/s [1,000, 1,000]</td>" in html  # gamma with its unit and interval
    app_fig, io_fig = sec.figures
    assert app_fig.id == "scalability-app" and io_fig.id == "scalability-usl"
    assert app_fig.csv.startswith("view,kind,concurrency,tps,std\napp,plateau,1,1000,")
    assert app_fig.promql == ["vm_app:ioparallax_app_transactions:rate1m"]
    assert io_fig.csv.count("guest,plateau,") == 8 and "app," not in io_fig.csv
    header = sec.csv["scalability-plateaus.csv"].splitlines()[0]
    assert header.startswith("concurrency,start_unix,end_unix,settled_seconds,app_tps_mean,app_tps_std")


def test_the_cvm_overhead_line_gives_the_mean_and_the_busiest_host():
    ds = density_dataset(cvm_shares={"esx-01": 0.05, "esx-02": 0.04, "esx-03": 0.07, "esx-04": 0.04})
    s = ramp(ds)
    assert s.cvm.mean == pytest.approx(0.05) and (s.cvm.busiest_host, s.cvm.hosts) == ("esx-03", 4)
    assert s.cvm.busiest == pytest.approx(0.07)
    html = scaling_section.scaling_section(context(ds), s).html
    assert (
        "<b>CVM overhead:</b> the CVMs used 5.0 % of their hosts&#x27; CPU capacity over the range "
        "(the busiest, on esx-03, 7.0 %; 4 hosts)"
    ) in html


def test_without_the_cpu_rules_or_an_application_no_density_or_cvm_line():
    s = ramp(ramp_dataset())
    assert s.cvm is None and s.density is None and "app" not in s.views
    html = section(ramp_dataset()).html
    assert "Density:" not in html and "CVM overhead" not in html
    # The CPU rules without an application: the CVM line alone, after the I/O view's fit.
    ds = ramp_dataset()
    ds.labelled = {f: [(m, a[: ds.times.size]) for m, a in rows] for f, rows in density_dataset().labelled.items()}
    html = section(ds).html
    assert "Density:" not in html
    assert html.index("<b>guest (fio):</b> Throughput") < html.index("<b>CVM overhead:</b> the CVMs used 5.0 %")


def test_the_density_line_says_no_peak_only_with_a_fit():
    d = scaling.Density(n_max=3, total=2923.4, per_vm=999.2, per_vm_source="measured with 1 VM", linear_share=0.975)
    assert scaling_section.density_sentence(d, "transactions/s") == (
        "Density: 3 VMs together completed 2,923 transactions/s, 97.5 % of linear (3 x 999 transactions/s, "
        "one VM's, measured with 1 VM); no fit, so no peak can be told (see above)."
    )
    d.fitted = True
    assert scaling_section.density_sentence(d, "transactions/s").endswith(
        "; the fit has no peak: every VM added still added throughput."
    )
    d.peak_n, d.peak_x, d.n_max = 5.2, 3416.7, 8
    assert scaling_section.density_sentence(d, "transactions/s").endswith(
        "; the fit peaked at 3,420 transactions/s near 5.2 VMs: more VMs lowered the total."
    )


def test_without_a_one_vm_plateau_linear_comes_from_the_fits_gamma():
    ds = density_dataset()
    keep = ds.times - T0 >= STEP_S  # the range starts with the second VM
    ds.times = ds.times[keep]
    for fam in ds.series.values():
        for k in fam:
            fam[k] = fam[k][keep]
    ds.labelled = {f: [(m, a[keep]) for m, a in rows] for f, rows in ds.labelled.items()}
    s = scaling.scaling(context(ds), ds)
    d = s.density
    assert [round(p.concurrency) for p in s.plateaus] == [2, 3, 4, 5, 6, 7, 8]
    assert d.per_vm_source == "the fit's gamma" and d.per_vm == pytest.approx(1000, rel=0.01)
    assert d.linear_share == pytest.approx(0.90, rel=0.01)
