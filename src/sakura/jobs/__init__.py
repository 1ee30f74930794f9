"""Ray batch jobs: build, publish and garbage-collect template KV libraries."""

__all__: list[str] = []
