"""HyperParameters encoding: the one home of how a value becomes the string SageMaker stores.

Two encodings exist on purpose, one per way the container is started (both pinned by parity tests):

- **script mode** (the DLC's sagemaker-training toolkit reads them): the SageMaker Python SDK v2
  ``json.dumps``-es every value, so strings get JSON quotes and booleans become ``true``
  (``EstimatorBase._json_encode_hyperparameters``; request-encoding reference §1);
- **entrypoint override** (our launcher, like the SDK v3 ``ModelTrainer``): ``safe_serialize``
  leaves strings unquoted and ``json.dumps`` the rest (request-encoding reference §4).

The toolkit reads a value back with :func:`decode_hyperparameter` (``json.loads``, else the raw
string), which is what the local backend does too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def encode_script_mode(value: Any) -> str:
    """SDK v2 script mode: every value is ``json.dumps``-ed (strings get quotes, bools become true)."""
    return json.dumps(value)


def encode_entrypoint_mode(value: Any) -> str:
    """Like the SDK v3 ``safe_serialize`` (ModelTrainer): strings unquoted, the rest JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def encode_hyperparameters(values: Mapping[str, Any], *, script_mode: bool = True) -> dict[str, str]:
    """Every value of ``values`` encoded for the request (keys as strings)."""
    encode = encode_script_mode if script_mode else encode_entrypoint_mode
    return {str(key): encode(value) for key, value in values.items()}


def decode_hyperparameter(value: str) -> Any:
    """TT:environment.py#read_hyperparameters: ``json.loads``, else the raw string."""
    try:
        return json.loads(value)
    except (ValueError, TypeError):
        return value
