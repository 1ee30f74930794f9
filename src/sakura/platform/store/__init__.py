"""Object stores chosen by URI scheme, with create-only and compare-and-swap writes."""

from sakura.platform.retry import RetryPolicy
from sakura.platform.store.base import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    ObjectInfo,
    ObjectStore,
    PreconditionFailed,
    StoreError,
    TransientStoreError,
    check_key,
)
from sakura.platform.store.registry import open_store, register_scheme, store_environment
from sakura.platform.store.retry import RetryingStore

__all__ = [
    "AlreadyExists",
    "InvalidKey",
    "NotFound",
    "ObjectInfo",
    "ObjectStore",
    "PreconditionFailed",
    "RetryPolicy",
    "RetryingStore",
    "StoreError",
    "TransientStoreError",
    "check_key",
    "open_store",
    "register_scheme",
    "store_environment",
]
