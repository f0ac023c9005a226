"""The PoC report: verdicts per VM disk, figures of the three views, scalability (USL) and comparison,
read from any Prometheus-compatible query API and written as one self-contained HTML file."""
