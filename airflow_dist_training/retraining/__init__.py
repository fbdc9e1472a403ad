"""Retraining over time: what a run is trained on (fingerprints), when it may be skipped, warm start.

Pure modules (no Airflow, boto3 or torch); the I/O lives in ``airflow_dist_training.hooks.fingerprint``.
See ``docs/retraining.md`` for one run's life.
"""
