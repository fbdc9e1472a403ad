"""FSx for Lustre staging logic that needs no I/O.

``requests`` builds the FSx API requests and decides whether an existing data repository
association can be reused; ``preflight`` judges already-fetched facts (file system, subnets,
security groups, S3 prefix size); ``progress`` formats data repository task progress and failures.

Pure: standard library and ``airflow_dist_training.errors`` only (no Airflow, no boto3), so the
rules are testable without AWS and reusable from a CLI. The hook (``hooks/fsx.py``) fetches the
facts; operators compose the two.
"""
