"""The phone-side library: adaptive shard selection and an overlapped fetch/decode/compute pipeline.

    from sakura.edge_client import EdgeSession
    with EdgeSession("http://127.0.0.1:8000", cache_dir="~/.sakura", cache_budget_bytes=64 << 20) as s:
        result = s.edit(photo, "portrait-style")  # policy="hybrid": compute or fetch

It imports :mod:`sakura.platform` and never ray, boto3, :mod:`sakura.serve` or :mod:`sakura.jobs`.
"""

from sakura.edge_client.cache import ShardCache
from sakura.edge_client.compute_model import ComputeModel
from sakura.edge_client.errors import (
    CachePathError,
    ConfigError,
    EditCancelled,
    EdgeError,
    PolicyError,
    RedirectError,
    ServerError,
    ShardCorrupt,
    TransportError,
)
from sakura.edge_client.estimator import BandwidthEstimator, Estimate
from sakura.edge_client.link import DirectLink, Link
from sakura.edge_client.oracle import OraclePolicy
from sakura.edge_client.pipeline import Device, EditPipeline
from sakura.edge_client.streaming_kv import StreamingKV
from sakura.edge_client.planning import COMPUTE, PlanContext, PlanState, ShardOption, advance, simulate
from sakura.edge_client.policy import (
    FixedPolicy,
    HybridPolicy,
    LevelPolicy,
    RobustMPCPolicy,
    ThroughputPolicy,
    make_policy,
    policy_names,
    register_policy,
)
from sakura.edge_client.session import EdgeSession, EditResult
from sakura.edge_client.timeline import ShardTiming, Stall, Timeline
from sakura.edge_client.transport import HttpTransport, RetryPolicy
from sakura.edge_client.urls import UrlPolicy

__all__ = [
    "BandwidthEstimator",
    "COMPUTE",
    "CachePathError",
    "ComputeModel",
    "ConfigError",
    "Device",
    "DirectLink",
    "EdgeError",
    "EdgeSession",
    "EditCancelled",
    "EditPipeline",
    "EditResult",
    "Estimate",
    "FixedPolicy",
    "HybridPolicy",
    "HttpTransport",
    "LevelPolicy",
    "Link",
    "OraclePolicy",
    "PlanContext",
    "PlanState",
    "PolicyError",
    "RedirectError",
    "RetryPolicy",
    "RobustMPCPolicy",
    "ServerError",
    "ShardCache",
    "ShardCorrupt",
    "ShardOption",
    "ShardTiming",
    "Stall",
    "StreamingKV",
    "ThroughputPolicy",
    "Timeline",
    "TransportError",
    "UrlPolicy",
    "advance",
    "make_policy",
    "policy_names",
    "register_policy",
    "simulate",
]
