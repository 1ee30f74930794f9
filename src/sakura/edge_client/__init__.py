"""The phone-side library: compute or fetch each block of a template's KV, over an overlapped
fetch/decode/compute pipeline.

    from sakura.edge_client import EdgeSession
    with EdgeSession("http://127.0.0.1:8000", cache_dir="~/.sakura", cache_budget_bytes=64 << 20) as s:
        result = s.edit(photo, "portrait-style")  # policy="hybrid": compute or fetch

An edit returns an :class:`EditResult`: the image (``(R, R, 3)`` float32 in [0, 1] at the
model's resolution ``R``) and its :class:`Timeline`. ``edit(..., cancel=threading.Event())``
stops it from another thread (raising :class:`~sakura.edge_client.errors.EditCancelled`), and
``edit(..., on_progress=callback)`` calls ``callback`` with a :class:`Progress` for every shard
fetched, decoded or computed, on the pipeline's threads:

    done = set()
    def on_progress(p: Progress) -> None:
        if p.kind in ("decoded", "computed"):
            done.add(p.shard)
            show(len(done) / p.shards)  # hand it to the UI thread

The public face is what an app needs: the session, its result and timeline and the progress
events, the level-policy registry (and what a policy is handed), the retry and URL policies,
and the errors (every one an :class:`EdgeError`, whose ``code`` says which; each type in
:mod:`sakura.edge_client.errors`). The public submodules are extension points:
:mod:`~sakura.edge_client.policy` (policies),
:mod:`~sakura.edge_client.planning`, :mod:`~sakura.edge_client.fetch_loop` and
:mod:`~sakura.edge_client.late_download` (the timing core, the fetch stage's decisions and the
compute stage's extend rule, which the simulator drives too),
:mod:`~sakura.edge_client.estimator`, :mod:`~sakura.edge_client.timeline`,
:mod:`~sakura.edge_client.link` and :mod:`~sakura.edge_client.device` (where an emulator hooks
the network and the compute). Modules and packages named ``_*`` are internal (``_http``: the
phone's HTTP stack). It imports :mod:`sakura.platform` and never
ray, boto3, pyarrow, :mod:`sakura.serve` or :mod:`sakura.jobs`.
"""

from sakura.edge_client._http.urls import UrlPolicy
from sakura.edge_client._result import EditResult
from sakura.edge_client._session import EdgeSession
from sakura.edge_client.errors import EdgeError
from sakura.edge_client.planning import COMPUTE, PlanContext
from sakura.edge_client.policy import LevelPolicy, make_policy, policy_names, register_policy
from sakura.edge_client.timeline import Progress, ShardTiming, Stall, Timeline
from sakura.platform.retry import RetryPolicy

__all__ = [
    "COMPUTE",
    "EdgeError",
    "EdgeSession",
    "EditResult",
    "LevelPolicy",
    "PlanContext",
    "Progress",
    "RetryPolicy",
    "ShardTiming",
    "Stall",
    "Timeline",
    "UrlPolicy",
    "make_policy",
    "policy_names",
    "register_policy",
]
