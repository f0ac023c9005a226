"""The VM view: vCenter's (or Prism's) samples."""

from __future__ import annotations

from ioparallax.mixin.rules.exprs import DIRECTIONS, Exprs
from ioparallax.mixin.rules.model import Group, Rule


def vm_sample_rates(x: Exprs) -> Group:
    """The VM view: vCenter's 20 s samples (or Prism's 30 s samples) of each VM disk, integrated over
    the manager's time they cover."""
    w = x.w
    vm: list[Rule] = [x.vm_sampled_seconds(w)]
    for d in DIRECTIONS:
        vm += [
            Rule(
                f"VM: {d} I/Os per second from every 20 s vCenter sample (30 s Prism sample on AHV): the "
                "ops integrated over the manager's time they cover (exact whatever the window's alignment "
                "with the samples).",
                f"{x.vm_rate(f'{d}_ops_total', w)}\n/\nvm_disk:ioparallax_vm_sampled_seconds:rate{w}",
                record=f"vm_disk:ioparallax_vm_{d}_ops:rate{w}",
            ),
            Rule(
                f"VM: {d} bytes per second from every vCenter or Prism sample (as above).",
                f"{x.vm_rate(f'{d}_bytes_total', w)}\n/\nvm_disk:ioparallax_vm_sampled_seconds:rate{w}",
                record=f"vm_disk:ioparallax_vm_{d}_bytes:rate{w}",
            ),
            Rule(
                f"VM: op-weighted mean {d} latency (latency x ops integrated, over ops).",
                f"{x.vm_rate(f'{d}_latency_seconds_total', w)}\n/\n({x.vm_rate(f'{d}_ops_total', w)} > 0)",
                record=f"vm_disk:ioparallax_vm_{d}_latency_seconds:mean{w}",
            ),
        ]
    vm.append(x.vm_outstanding_ios(w))
    return Group(
        "ioparallax.vm",
        "The VM view per VM disk: every 20 s vCenter sample (30 s Prism sample on AHV), integrated.",
        vm,
    )
