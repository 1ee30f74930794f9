"""SAKURA: template KV caching, compression and adaptive streaming for on-device DiT editing."""

__version__ = "0.1.0"
