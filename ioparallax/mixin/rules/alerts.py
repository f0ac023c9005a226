"""The alerts, one group per kind of signal: the guest's facts, the storage, the views, the monitoring."""

from __future__ import annotations

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.rules.cpu import cpu_alerts
from ioparallax.mixin.rules.esxtop import PEAK_RATIO as ESXTOP_PEAK_RATIO, period_template
from ioparallax.mixin.rules.model import Group, Rule, keep_cluster
from ioparallax.mixin.vmview import SAMPLE_SECONDS
from ioparallax.units import prometheus_duration_seconds


def alert_groups(cfg: MixinConfig) -> list[Group]:
    """The alert groups, one per kind of signal: the guest's facts, the storage, the views, the monitoring."""
    kit = _AlertKit(cfg)
    return keep_cluster(
        [
            _guest_fact_alerts(kit),
            _storage_alerts(kit),
            _view_alerts(kit),
            _exporter_alerts(kit),
            cpu_alerts(cfg, kit.alert),
        ],
        cfg,
    )


class _AlertKit:
    """What every alert group uses: the config's thresholds, `for` durations and selectors, one alert builder."""

    def __init__(self, cfg: MixinConfig) -> None:
        self.cfg = cfg
        self.t, self.f, self.w = cfg.thresholds, cfg.for_, cfg.windows.rate
        self.fio, self.st, self.vc = cfg.sel("fio"), cfg.sel("stargate"), cfg.sel("vcenter")
        self.prism = cfg.sel("prism")
        self.busy = f"{self.t.busy_bytes_per_second:.0f}"

    def alert(
        self,
        name: str,
        severity: str,
        for_: str,
        expr: str,
        summary: str,
        description: str,
        comment: str,
        **labels: str,
    ) -> Rule:
        annotations = {"summary": summary, "description": description, "runbook_url": self.cfg.alerts.runbook(name)}
        return Rule(
            comment, expr, alert=name, for_=for_, labels={"severity": severity, **labels}, annotations=annotations
        )


def _guest_fact_alerts(kit: _AlertKit) -> Group:
    """Facts of the guest itself: partition alignment (and Windows' split I/Os), fio job hygiene."""
    f, fio, alert, t, w, busy = kit.f, kit.fio, kit.alert, kit.t, kit.w, kit.busy
    return Group(
        "ioparallax-guest-alerts",
        "What the guest's own facts say (reliable signals).",
        [
            alert(
                "IoparallaxMisalignedPartition",
                "warning",
                f.misaligned_partition,
                f"fio_guest_partition_aligned{fio} == 0",
                "A guest partition is not on the 4 KiB grid.",
                "Partition {{ $labels.partition }} of {{ $labels.disk }} on {{ $labels.instance }} starts at an "
                "offset that is not a multiple of 4096 bytes: every write straddles two storage blocks and "
                "needs a read-modify-write (1 MiB writes run at ~60 % of aligned throughput). Recreate the "
                "partition at 1 MiB (parted -a optimal) before measuring.",
                "The guest's partition start (sysfs start x 512) modulo 4096 is not 0.",
            ),
            alert(
                "IoparallaxFioJobHygiene",
                "warning",
                f.hygiene,
                f"fio_job_hygiene_problem{fio} == 1",
                "A fio job's options make its results unrepresentative.",
                "fio job {{ $labels.jobname }} on {{ $labels.host }} has the hygiene problem {{ $labels.problem }} "
                "(see docs/hygiene.md): its numbers do not describe what the application will get. Fix the "
                "job file and run it again.",
                "One alert per trap found in a job's options by the fio exporter.",
            ),
            alert(
                "IoparallaxDiskspdTargetHygiene",
                "warning",
                f.hygiene,
                f"diskspd_target_hygiene_problem{kit.cfg.sel('diskspd')} == 1",
                "A DiskSPD result was measured with a benchmark trap.",
                "DiskSPD target {{ $labels.target }} of {{ $labels.host }} ({{ $labels.source }}) has the hygiene "
                "problem {{ $labels.problem }} (see docs/hygiene.md): its numbers do not describe what the "
                "application will get. Fix the command line (check it first with ioparallax-check) and run it again.",
                "One alert per trap the DiskSPD exporter found in a result's target (the fio alert's counterpart; "
                "checks the XML cannot decide, diskspd_target_hygiene_cannot_tell, are not alerts).",
            ),
            alert(
                "IoparallaxVdbenchRunHygiene",
                "warning",
                f.hygiene,
                f"vdbench_run_hygiene_problem{kit.cfg.sel('vdbench')} == 1",
                "A vdbench run was measured with a benchmark trap.",
                "vdbench run {{ $labels.run }} in {{ $labels.source }} has the hygiene problem {{ $labels.problem }} "
                "(see docs/hygiene.md): its numbers do not describe what the application will get. Fix the "
                "parameter file (check it first with ioparallax-check) and run it again.",
                "One alert per trap the vdbench exporter found in a run (the fio alert's counterpart; checks the "
                "output directory cannot decide, vdbench_run_hygiene_cannot_tell, are not alerts).",
            ),
            alert(
                "IoparallaxPgbenchRunHygiene",
                "warning",
                f.hygiene,
                f"pgbench_run_hygiene_problem{kit.cfg.sel('pgbench')} == 1",
                "A pgbench run was measured with a benchmark trap.",
                "pgbench run {{ $labels.run }} in {{ $labels.source }} on {{ $labels.instance }} has the hygiene "
                "problem {{ $labels.problem }} (see docs/hygiene.md#pgbench): for a storage test its numbers describe "
                "memory or the test, not the storage (a database that fits in memory is what a density test wants: "
                "say which the PoC is). Check the next run first with ioparallax-check.",
                "One alert per trap the pgbench exporter found in a run's summary (the fio alert's counterpart; "
                "checks it cannot decide, pgbench_run_hygiene_cannot_tell, are not alerts).",
            ),
            alert(
                "IoparallaxGuestSplitIo",
                "info",
                f.misaligned_partition,
                f"vm_disk:ioparallax_guest_os_split_ios:ratio{w} > {t.split_io_ratio:g}\n"
                f"and on (vm, disk) (\n  vm_disk:ioparallax_guest_os_read_bytes:rate{w}\n"
                f"  + vm_disk:ioparallax_guest_os_write_bytes:rate{w}\n) > {busy}",
                "Windows splits most of this disk's I/Os: a misaligned partition is suspected (hint).",
                "Windows split {{ $value | humanizePercentage }} of the I/Os on {{ $labels.vm }} {{ $labels.disk }} "
                "(windows_exporter split_ios_total): the signature of a partition off the 4 KiB grid (Windows "
                "2003's 63 sectors, 1536 bytes) or of a fragmented test file. Check the partition offset "
                "(Get-Partition | fl Offset: a multiple of 4096) before trusting the results; windows_exporter "
                "does not show it.",
                "Windows guest hint (windows_exporter has no partition offset): split I/Os over I/Os, disk busy.",
                signal="heuristic",
            ),
        ],
    )


def _storage_alerts(kit: _AlertKit) -> Group:
    """What the storage did with the benchmark's I/O: zero buckets, cache, read-modify-write."""
    t, f, w, busy, alert = kit.t, kit.f, kit.w, kit.busy, kit.alert
    return Group(
        "ioparallax-storage-alerts",
        "What the storage did with the benchmark's I/O.",
        [
            alert(
                "IoparallaxZeroHeavyReads",
                "warning",
                f.zero_heavy,
                f"vdisk:ioparallax_read_zero:ratio > {t.zero_read_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_read_bytes:avg{w} > {busy}",
                "Reads are served from zero buckets: the storage reads no disk for them.",
                "{{ $value | humanizePercentage }} of the bytes read from vdisk {{ $labels.vdisk_id }} "
                "({{ $labels.vm }} {{ $labels.disk }}) come from zero buckets (Estore/Oplog Zero): never-written "
                "or all-zero blocks that no disk serves. IOPS and latency are inflated. Fill the test files with "
                "non-zero data first (fio without zero_buffers, with refill_buffers) and run again.",
                "Zero share of read bytes above the threshold while the vdisk is busy reading.",
            ),
            alert(
                "IoparallaxZeroHeavyWrites",
                "warning",
                f.zero_heavy,
                f"vdisk:ioparallax_write_zero:ratio > {t.zero_write_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_write_bytes:avg{w} > {busy}",
                "Writes are all-zero blocks: the storage stores metadata only.",
                "{{ $value | humanizePercentage }} of the bytes written to vdisk {{ $labels.vdisk_id }} "
                "({{ $labels.vm }} {{ $labels.disk }}) land in Oplog Zero: all-zero blocks that are never "
                "stored. Write throughput and latency are inflated. Use non-zero buffers (fio: no zero_buffers; "
                "buffer_compress_percentage only with buffer_pattern; DiskSPD -Z).",
                "Zero share of written bytes above the threshold while the vdisk is busy writing.",
            ),
            alert(
                "IoparallaxBenchmarkFromCache",
                "warning",
                f.cache,
                f"vdisk:ioparallax_read_cache:ratio > {t.cache_read_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_working_set_to_cache:ratio < {t.working_set_to_cache_ratio:g}\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_read_bytes:avg{w} > {busy}",
                "The benchmark's working set fits in the CVM's memory (hero numbers).",
                "{{ $value | humanizePercentage }} of the bytes read from vdisk {{ $labels.vdisk_id }} "
                "({{ $labels.vm }} {{ $labels.disk }}) come from the CVM's DRAM/extent cache and its 2-minute "
                "working set is smaller than the cache: latency and IOPS describe memory, not the storage. "
                "Size the test files above the cache (several times the working set of the real application).",
                "Read share from memory above the threshold, working set below the cache, vdisk busy.",
            ),
            alert(
                "IoparallaxMisalignedIoSuspected",
                "info",
                f.misaligned_io,
                f"vdisk:ioparallax_rmw_read_to_write:ratio{w} > {t.misaligned_read_to_write_ratio:g}\n"
                f"and on (vdisk_id) (\n  vdisk:ioparallax_frontend_read_bytes:avg{w}\n"
                f"  < {t.misaligned_frontend_read_to_write_ratio:g} * vdisk:ioparallax_frontend_write_bytes:avg{w}\n)\n"
                f"and on (vdisk_id) vdisk:ioparallax_frontend_write_bytes:avg{w} > {busy}",
                "The storage reads on a write-only workload: misaligned writes suspected (heuristic).",
                "Vdisk {{ $labels.vdisk_id }} ({{ $labels.vm }} {{ $labels.disk }}) is written but hardly read, "
                "yet the storage reads {{ $value | humanizePercentage }} of the written bytes: the signature "
                "of read-modify-write on writes that straddle 4 KiB blocks. This is a heuristic: confirm with "
                "the guest's partition offsets (IoparallaxMisalignedPartition, fio_guest_partition_aligned).",
                "Storage-side heuristic, labelled as such: back-end reads on a write-only workload.",
                signal="heuristic",
            ),
        ],
    )


def _view_alerts(kit: _AlertKit) -> Group:
    """Where the views disagree: bursts averaged away, a queue depth never reached, bytes that differ."""
    cfg, t, f, w, busy, alert = kit.cfg, kit.t, kit.f, kit.w, kit.busy, kit.alert
    # A disk's load is judged for bursts once it has run for the rate window and the longest VM
    # sample (Prism's 30 s) more: until then the VM view's window holds samples from before it started.
    settled = f"{(prometheus_duration_seconds(w) or 0) + 30:.0f}s"
    peak_ratio = ESXTOP_PEAK_RATIO.format(w=w)

    def disagree(layer: str) -> str:
        # Ratio and busy gate over the agreement window (recording_rules): a 1m gate flaps for a
        # workload that bursts once a minute, and every flap would restart the alert's `for`.
        a = cfg.windows.agreement
        ratio = f"vm_disk:ioparallax_{layer}_to_vm_bytes:ratio{a}"
        gate = f"vm_disk:ioparallax_vm_bytes:rate{a}" if a != w else both_bytes(w)
        expr = (
            f"(\n  {ratio} > {t.views_bytes_ratio:g}\n  or {ratio} < {1 / t.views_bytes_ratio:.4g}\n)\n"
            f"and on (vm, disk) {gate} > {busy}"
        )
        if layer == "storage":
            # The Stargate page shows rates over a window of a few seconds, sampled at each scrape:
            # bursts shorter than the scrape interval are seen at their height or not at all, the
            # same way every time when the burst period is a multiple of the scrape interval. Its
            # bytes cannot be compared while IoparallaxBurstAveragedAway's condition holds.
            expr += f"\nunless on (vm, disk) vm_disk:ioparallax_burstiness:ratio{a} > {t.burstiness_ratio:g}"
        return expr

    return Group(
        "ioparallax-views-alerts",
        "Where the views disagree, and why.",
        [
            alert(
                "IoparallaxBurstAveragedAway",
                "warning",
                f.burst,
                # Where esxtop's 2 s view of the disk is there, the bursts are measured in the VM view
                # itself (vm_view="esxtop"); elsewhere inferred by Little's law from the guest's depth.
                f"label_replace(\n  {peak_ratio} > {t.burstiness_ratio:g}\n  and on (vm, disk) {both_bytes(w)} > {busy}\n"
                f"  and on (vm, disk) (\n    vm_disk:ioparallax_vm_read_bytes:rate{w} offset {settled}\n"
                f"    + vm_disk:ioparallax_vm_write_bytes:rate{w} offset {settled}\n  ) > {busy},\n"
                '  "vm_view", "esxtop", "", ""\n)\nor\n(\n'
                f"  vm_disk:ioparallax_burstiness:ratio{w} > {t.burstiness_ratio:g}\n"
                f"  and on (vm, disk) {both_bytes(w)} > {busy}\n"
                f"  and on (vm, disk) (vm_disk:ioparallax_guest_iodepth:sum offset {settled})\n"
                f"  unless on (vm, disk) {peak_ratio}\n)",
                "The VM view's sample averages flatten this disk's bursts.",
                '{{ if eq $labels.vm_view "esxtop" }}'
                f"esxtop's samples of {{{{ $labels.vm }}}} {{{{ $labels.disk }}}} ({period_template(cfg.cluster_label)}) "
                f'peak at {{{{ $value | printf "%.1f" }}}} times the highest of vCenter\'s {SAMPLE_SECONDS["vcenter"]} s '
                f'samples over {w}: the I/O comes in bursts that vCenter\'s samples average away ("low" '
                "throughput), and the 2 s VM view shows. Judge throughput on the esxtop series (the three-views "
                "dashboard's esxtop sample) or the guest's per-interval numbers, and latency op-weighted."
                "{{ else }}"
                'The guest runs {{ $labels.vm }} {{ $labels.disk }} at a queue depth {{ $value | printf "%.1f" }} '
                "times the concurrency the VM view implies (throughput x latency): the I/O comes in bursts that "
                "the VM view's samples (vCenter's 20 s, Prism's 30 s on AHV) average away (high latency, "
                '"low" throughput). Judge throughput on '
                "fio's per-interval numbers or irate() with short scrapes, and latency op-weighted."
                "{{ end }}",
                'The VM view\'s own 2 s samples where an esxtop capture covers the disk (vm_view="esxtop": the '
                "highest esxtop sample over the highest vCenter sample); elsewhere Little's law: guest iodepth "
                "over the VM's implied concurrency. Both while the disk is busy, once the "
                "load has run for the window and a VM sample (30 s, Prism's): right after a job starts, the VM's "
                "window still holds the idle samples from before it, which reads as a burst (a VM "
                "joining a scaling ramp). The esxtop branch asks that the VM view saw the disk busy then, "
                "Little's law that a fio job ran then.",
            ),
            alert(
                "IoparallaxAskedQueueDepthNotReached",
                "warning",
                f.burst,
                f"vm_disk:ioparallax_asked_to_implied_iodepth:ratio{w} > {t.asked_to_implied_iodepth_ratio:g}\n"
                f"and on (vm, disk) vm_disk:ioparallax_guest_buffered_io:bool == 1\n"
                f"and on (vm, disk) {both_bytes(w)} > {busy}",
                "Asked queue depth not reached (buffered I/O).",
                'The fio jobs on {{ $labels.vm }} {{ $labels.disk }} ask for a queue depth {{ $value | printf "%.1f" }} '
                "times the concurrency the VM view implies (throughput x latency), and they run buffered "
                "(direct=0): buffered libaio submits synchronously, so the asked iodepth is never reached and the "
                "result describes a queue depth of about one per job, through the guest page cache. Run with "
                "direct=1 to test the asked depth, or with a synchronous engine (psync) and numjobs set to the "
                "concurrency wanted.",
                "Little's law on a buffered disk: the asked depth far above the VM's implied concurrency, "
                "while the disk is busy (IoparallaxBurstAveragedAway does not judge buffered disks).",
            ),
            alert(
                "IoparallaxViewsDisagree",
                "warning",
                f.views_disagree,
                disagree("guest"),
                "The guest and the VM disagree on the bytes moved.",
                'Over {cfg.windows.agreement}, the guest moved {{ $value | printf "%.2f" }} times the bytes '
                "the VM view (vCenter, or Prism on AHV) counted for {{ $labels.vm }} {{ $labels.disk }}. Check "
                "that the fio jobs run on this "
                "disk (filename), that no other process writes to it, and that every exporter is up.".replace(
                    "{cfg.windows.agreement}", cfg.windows.agreement
                ),
                "Guest bytes against VM bytes over the agreement window, outside the tolerance.",
            ),
            alert(
                "IoparallaxStorageViewDisagrees",
                "warning",
                f.views_disagree,
                disagree("storage"),
                "The storage and the VM disagree on the bytes moved.",
                "Over " + cfg.windows.agreement + ", the Stargate frontend of {{ $labels.vm }} {{ $labels.disk }} "
                'moved {{ $value | printf "%.2f" }} times the bytes the VM view (vCenter, or Prism on AHV) '
                "counted. Check the vdisk mapping "
                "(stargate_vdisk_info vm/disk), that every CVM is probed (a moved vdisk), and other VMs on the "
                "same vdisk.",
                "Storage frontend bytes against VM bytes over the agreement window, outside the tolerance.",
            ),
        ],
    )


def _exporter_alerts(kit: _AlertKit) -> Group:
    """The monitoring itself: an exporter, a CVM, a vCenter, a Prism or a fio file that cannot be read, slow scrapes."""
    cfg, t, f, fio, st, vc, alert = kit.cfg, kit.t, kit.f, kit.fio, kit.st, kit.vc, kit.alert
    return Group(
        "ioparallax-exporters-alerts",
        "The monitoring itself: what cannot be seen.",
        [
            alert(
                "IoparallaxExporterDown",
                "critical",
                f.down,
                f"up{{{cfg.selectors.exporters}}} == 0",
                "Prometheus cannot scrape an ioparallax exporter.",
                "{{ $labels.job }} target {{ $labels.instance }} does not answer Prometheus: a whole view is "
                "missing from the dashboards. Check that the exporter runs and listens where the scrape "
                "config says.",
                "The scrape itself fails (exporter process down or unreachable).",
            ),
            alert(
                "IoparallaxStargateDown",
                "warning",
                f.down,
                f"stargate_up{st} == 0",
                "A CVM's Stargate page cannot be read.",
                "The Stargate exporter cannot read {{ $labels.instance }} (port 2009): the vdisks hosted there "
                "are missing from the storage view. The exporter's log names the cause (refused: firewall; "
                "timeout; not a Stargate page).",
                "The probe of one CVM fails (the exporter is up).",
            ),
            alert(
                "IoparallaxVcenterDown",
                "warning",
                f.down,
                f"vcenter_up{vc} == 0",
                "vCenter cannot be collected.",
                "The vCenter exporter cannot collect {{ $labels.instance }}: the VM view is missing. "
                "vcenter_probe_error_info names the cause (login, tls, connect, timeout).",
                "The probe of one vCenter fails (the exporter is up).",
            ),
            alert(
                "IoparallaxPrismDown",
                "warning",
                f.down,
                f"prism_up{kit.prism} == 0",
                "Prism cannot be collected.",
                "The Prism exporter cannot collect {{ $labels.instance }}: the VM view of the AHV cluster is "
                "missing. prism_probe_error_info names the cause (login, tls, connect, timeout); the "
                "exporter's log names the target.",
                "The probe of one Prism (an AHV cluster's VM view) fails (the exporter is up).",
            ),
            alert(
                "IoparallaxFioSourceDown",
                "warning",
                f.down,
                f"fio_source_up{fio} == 0",
                "A fio output file cannot be used.",
                "The fio exporter on {{ $labels.instance }} cannot use {{ $labels.source }}: that job's guest "
                "view is missing. fio_source_error_info{reason} says why (unreadable, corrupt, invalid_value, "
                "too_large, truncated); the exporter's log names the file and the cause.",
                "One watched fio output file is unreadable, corrupt or holds values fio cannot write.",
            ),
            alert(
                "IoparallaxDiskspdSourceDown",
                "warning",
                f.down,
                f"diskspd_source_up{kit.cfg.sel('diskspd')} == 0",
                "A DiskSPD result file cannot be used.",
                "The DiskSPD exporter on {{ $labels.instance }} cannot use {{ $labels.source }}: that run's guest "
                "view is missing. diskspd_source_error_info{reason} says why (unreadable, corrupt, truncated, "
                "not_diskspd, invalid_value, forbidden_markup, too_large); the exporter's log names the file.",
                "One watched DiskSPD result is unreadable, cut off or not a DiskSPD -Rxml document.",
            ),
            alert(
                "IoparallaxVdbenchSourceDown",
                "warning",
                f.down,
                f"vdbench_source_up{kit.cfg.sel('vdbench')} == 0",
                "A vdbench output directory cannot be used.",
                "The vdbench exporter on {{ $labels.instance }} cannot use {{ $labels.source }}: that run's guest "
                "view is missing. vdbench_source_error_info{file, reason} names the file and why (unreadable, "
                "not_vdbench, too_large); the exporter's log names the file.",
                "One watched vdbench output directory has a file that cannot be read or is not vdbench output.",
            ),
            alert(
                "IoparallaxPgbenchSourceDown",
                "warning",
                f.down,
                f"pgbench_source_up{kit.cfg.sel('pgbench')} == 0",
                "A pgbench output file cannot be used.",
                "The pgbench exporter on {{ $labels.instance }} cannot use {{ $labels.source }}: that database's "
                "application view is missing. pgbench_source_error_info{reason} says why (unreadable, "
                "not_pgbench, truncated); the exporter's log names the file and the cause.",
                "One watched pgbench file cannot be read or is not pgbench output.",
            ),
            alert(
                "IoparallaxStargateUnreadFields",
                "info",
                f.unread_fields,
                f"stargate_parse_unknown_fields{st} > 0",
                "A CVM's pages hold fields ioparallax does not read.",
                "The Stargate pages of {{ $labels.instance }} hold {{ $value }} tables, rows or columns "
                "ioparallax does not read (stargate_parse_unknown_field_pages names them; the exporter's "
                "log too, with the page build): the storage view may be incomplete. Capture the pages and "
                "report them: stargate-exporter capture --target {{ $labels.instance }} (README: Reporting "
                "a page or answer ioparallax misreads).",
                "Parse coverage: another page build than the ones the parser knows.",
            ),
            alert(
                "IoparallaxPrismUnreadFields",
                "info",
                f.unread_fields,
                f"prism_parse_unknown_fields{kit.prism} > 0",
                "A Prism's answers hold statistics ioparallax does not read.",
                "The virtual_disks answers of Prism {{ $labels.instance }} hold {{ $value }} stats keys "
                "ioparallax does not map (prism_parse_unknown_field_entities names them; the exporter's "
                "log too): another AOS version than the ones the exporter knows. Capture the answers and "
                "report them: prism-exporter capture --target {{ $labels.instance }} (README: Reporting a "
                "page or answer ioparallax misreads).",
                "Parse coverage: stats keys of an AOS version the exporter does not know.",
            ),
            alert(
                "IoparallaxScrapeSlow",
                "warning",
                f.scrape_slow,
                f"scrape_duration_seconds{{{cfg.selectors.exporters}}}\n"
                f"> {t.scrape_duration_ratio:g} * scrape_timeout_seconds{{{cfg.selectors.exporters}}}",
                "A scrape takes most of its timeout.",
                "Scrapes of {{ $labels.job }} target {{ $labels.instance }} take {{ $value | humanizeDuration }}, "
                "close to the scrape timeout: soon they fail and the view has gaps. Raise scrape_timeout, "
                "probe fewer CVMs per target, or raise the exporter's concurrency.",
                "Needs Prometheus' --enable-feature=extra-scrape-metrics (scrape_timeout_seconds).",
            ),
        ],
    )


def both_bytes(w: str) -> str:
    return f"(vm_disk:ioparallax_vm_read_bytes:rate{w} + vm_disk:ioparallax_vm_write_bytes:rate{w})"
