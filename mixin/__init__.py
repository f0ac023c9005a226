"""Rules, alerts and dashboards generated from one config (mixin/config.yml)."""
