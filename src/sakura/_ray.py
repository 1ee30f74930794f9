"""How the ``sakura`` commands join or start Ray: one place, so every command behaves alike.

A command either joins a cluster (``address``) or starts a private local one, which it shuts
down when done. A local cluster runs with Ray's token authentication on, Ray's own default for
local clusters since 2.59, which Ray announces with a warning on every start: that one line is
dropped (the opposite warning, auth disabled, is kept). Workers' output stays in Ray's log files,
not on the command's terminal.
"""

from __future__ import annotations

import logging
from typing import Any

#: Where Ray announces that a local cluster enabled token auth by default.
_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


class _DropAuthEnabledNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled")


def join_or_start(address: str | None, **init: Any) -> bool:
    """``ray.init`` on ``address``, or on a new local cluster; True when this call started it."""
    import ray

    auth_log = logging.getLogger(_AUTH_LOGGER)
    if not any(isinstance(f, _DropAuthEnabledNotice) for f in auth_log.filters):
        auth_log.addFilter(_DropAuthEnabledNotice())
    options: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING", "log_to_driver": False}
    ray.init(address=address or "local", **{**options, **init})
    return not address
