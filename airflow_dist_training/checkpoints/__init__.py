"""Checkpoint logic: selection, retention, resume policy, interruption budget. Pure (no I/O).

Import from the submodules (``selection``, ``retention``, ``resume``): the package re-exports
nothing, so importing one of them at DAG parse time does not import the others.

The in-container writer is :mod:`airflow_dist_training.checkpointing`; S3/local I/O is
:class:`airflow_dist_training.hooks.checkpoints.CheckpointHook`.
"""
