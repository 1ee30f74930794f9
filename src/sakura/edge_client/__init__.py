"""The phone-side library: adaptive shard selection and an overlapped fetch/decode/compute pipeline.

It imports :mod:`sakura.platform` and never ray, boto3, :mod:`sakura.serve` or :mod:`sakura.jobs`.
"""

__all__: list[str] = []
