"""One storage protocol: :class:`ObjectStore`, chosen by URI scheme from an open registry.

Built in: ``file`` (:class:`LocalStore`, plain paths and ``file://``) and ``s3``
(:class:`~airflow_dist_training.storage.s3.S3Store`). Another store is one module that calls
:func:`register_store` with a :class:`StoreScheme` (as a strategy registers its record); checkpoint
semantics, evaluation artefacts, the local executor's buckets and the checkpoint sync then work on it.

The names load on first use (PEP 562, in ``stores``): a DAG parse imports ``storage.location`` for
``split_uri`` and so runs this file, but needs no store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_dist_training.storage.stores import (
        FileStat,
        LocalStore,
        ObjectStore,
        StoreOptions,
        Stores,
        StoreScheme,
        atomic_write,
        copy_between,
        get_tree,
        local_files,
        put_tree,
        register_store,
        unregister_store,
    )

__all__ = [
    "FileStat",
    "LocalStore",
    "ObjectStore",
    "StoreOptions",
    "StoreScheme",
    "Stores",
    "atomic_write",
    "copy_between",
    "get_tree",
    "local_files",
    "put_tree",
    "register_store",
    "unregister_store",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from airflow_dist_training.storage import stores

        return getattr(stores, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
