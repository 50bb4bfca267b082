"""Veil: private representation learning on Ray."""

__version__ = "0.1.0"
