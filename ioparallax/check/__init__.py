"""``ioparallax-check``: benchmark hygiene findings before a run, from the rules the exporters use."""
