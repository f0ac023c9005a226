"""Code shared by the three exporters: HTTP serving, configuration errors, logging."""
