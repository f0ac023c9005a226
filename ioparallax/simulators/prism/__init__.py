"""A simulated Prism (Nutanix's cluster management API) computed from a scenario trace: the VM
view of each virtual disk (``hypervisor_*``) and the coarse storage view (``controller_*``) as
Prism's 30 s samples, over the v2.0 REST paths and the v4 VMM stats path. See docs/prism.md."""
