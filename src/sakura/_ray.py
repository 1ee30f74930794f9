"""How the ``sakura`` commands join or start Ray: one place, so every command behaves alike.

A command either joins a cluster (``address``) or starts a private local one, which it shuts
down when done. A local cluster runs with Ray's token authentication on, Ray's own default for
local clusters since 2.59, which Ray announces with a warning on every start: that one line is
dropped (the opposite warning, auth disabled, is kept). Workers' output stays in Ray's log files,
not on the command's terminal.

A local cluster also gives Serve's HTTP proxy longer to answer its ready checks (see
:data:`LOCAL_ENV`): on a busy two-core machine a fresh proxy took over three of Serve's 5 s
checks to start, and Serve then killed it, failing ``sakura demo`` with ``ActorDiedError``.
"""

from __future__ import annotations

import logging
import os
from typing import Any

#: Where Ray announces that a local cluster enabled token auth by default.
_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


#: Environment a local cluster's processes inherit (a value already set is kept). Serve's proxy
#: ready check times out at 5 s and three misses kill the proxy; 30 s is an estimate that covers
#: a proxy starting on a loaded two-core machine. A joined cluster keeps its own settings.
LOCAL_ENV = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "30"}


class _DropAuthEnabledNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled")


def join_or_start(address: str | None, **init: Any) -> bool:
    """``ray.init`` on ``address``, or on a new local cluster; True when this call started it."""
    import ray

    auth_log = logging.getLogger(_AUTH_LOGGER)
    if not any(isinstance(f, _DropAuthEnabledNotice) for f in auth_log.filters):
        auth_log.addFilter(_DropAuthEnabledNotice())
    if not address:
        for name, value in LOCAL_ENV.items():
            os.environ.setdefault(name, value)  # read by Serve's controller, a child of this cluster
    options: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING", "log_to_driver": False}
    ray.init(address=address or "local", **{**options, **init})
    return not address
