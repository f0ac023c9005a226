"""What the exporters share (docs/architecture.md): the web front, configuration, logging, the
multi-target wiring and capture archives of the network exporters, the settings, file finding and
families of the watch exporters."""
