"""Simulated sources for tests and the demo: every view is computed from one scenario trace."""
