"""What the operator must put in S3 before ``CreateTrainingJob`` (shared by request and launcher plans)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Upload:
    """Something the operator must put in S3 before ``CreateTrainingJob``."""

    s3_uri: str
    kind: str  # "source" (pack local_path as sourcedir.tar.gz) or "file"
    local_path: str | None = None
    content: bytes | None = None
    kms_key: str | None = None
    # "source": files or directories packed beside local_path's files (spec source.dependencies)
    dependencies: tuple[str, ...] = ()
