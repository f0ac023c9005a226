"""The recording rule groups, one per view of the VM disk and one per comparison of the views."""

from __future__ import annotations

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.rules.app import application_rates
from ioparallax.mixin.rules.compare import agreement_window_rates, view_ratios
from ioparallax.mixin.rules.cpu import cpu_rules
from ioparallax.mixin.rules.esxtop import esxtop_vm_view
from ioparallax.mixin.rules.exprs import Exprs
from ioparallax.mixin.rules.guest import guest_fio_rates, guest_os_block_layer_rates
from ioparallax.mixin.rules.joins import identity_joins
from ioparallax.mixin.rules.model import Group, keep_cluster
from ioparallax.mixin.rules.storage import storage_bucket_shares, storage_frontend_rates
from ioparallax.mixin.rules.vm import vm_sample_rates


def recording_rules(cfg: MixinConfig) -> list[Group]:
    """The recording rule groups, one per view of the VM disk and one per comparison of the views."""
    x = Exprs(cfg)
    groups = [
        identity_joins(x),
        guest_fio_rates(x),
        guest_os_block_layer_rates(x),
        vm_sample_rates(x),
        esxtop_vm_view(x),
        storage_frontend_rates(x),
        storage_bucket_shares(x),
        view_ratios(x),
        application_rates(x),
        cpu_rules(cfg),
    ]
    if cfg.windows.agreement != x.w:
        groups.append(agreement_window_rates(x))
    # else the views-disagree alerts judge the ratios of ioparallax.views
    return keep_cluster(groups, cfg)
