"""Rules, alerts and dashboards generated from one config (ioparallax/mixin/config.yml)."""
