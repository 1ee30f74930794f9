"""The Ray Serve application that serves the catalogue, manifests and shards."""

__all__: list[str] = []
