"""ioparallax: the package namespace for new code (the report); the exporters, simulators and mixin
still live in their own top-level packages until they move under it (see issue 16)."""
