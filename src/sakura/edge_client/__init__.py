"""The phone-side library: adaptive shard selection and an overlapped fetch/decode/compute pipeline.

It imports :mod:`sakura.platform` and never ray, boto3, :mod:`sakura.serve` or :mod:`sakura.jobs`.
"""

from sakura.edge_client.estimator import BandwidthEstimator, Estimate

__all__ = ["BandwidthEstimator", "Estimate"]
