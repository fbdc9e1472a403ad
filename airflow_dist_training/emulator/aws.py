"""AWS-shaped answers where moto has none: errors for unimplemented actions, and IAM's role answers.

moto raises ``NotImplementedError`` for an action it lacks, which its server turns into an HTML
page with HTTP 500: botocore cannot parse it (``ResponseParserError``) and retries it as a server
fault. :func:`error_response` answers instead as AWS answers an error, in the protocol the client
spoke (query XML, JSON, REST-XML or RPCv2 CBOR), with a code and a message that name the action.

IAM: a role's permissions cannot be known here, so the endpoint allows by default
(``SimulatePrincipalPolicy``/``SimulateCustomPolicy`` answer ``allowed``; ``GetRole`` of a role
nobody created answers a SageMaker execution role). docs/emulator.md says so.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import uuid
from typing import Any

# the services the endpoint serves for SageMaker clients (moto serves more; these are the tested ones)
SERVICES = ("s3", "sagemaker", "logs", "iam", "sts", "cloudwatch", "fsx", "ec2")
NOT_IMPLEMENTED = "NotImplemented"
_SCOPE = re.compile(r"Credential=[^/]*/\d{8}/([^/]+)/([^/]+)/aws4_request")
_CBOR_PATH = re.compile(r"^/service/[^/]+/operation/([A-Za-z0-9]+)$")
# SigV4 signing names that are not botocore's service names
_SIGNING_NAMES = {"monitoring": "cloudwatch"}
SAGEMAKER_TRUST_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
)


def service_of(environ: dict[str, Any]) -> str | None:
    """The botocore service a request is for: its SigV4 credential scope (header or presigned URL)."""
    scope = str(environ.get("HTTP_AUTHORIZATION") or "")
    query = urllib.parse.unquote(str(environ.get("QUERY_STRING") or ""))
    m = _SCOPE.search(scope) or _SCOPE.search(query.replace("X-Amz-Credential=", "Credential="))
    return _SIGNING_NAMES.get(m.group(2), m.group(2)) if m else None


def action_of(environ: dict[str, Any], body: bytes, service: str | None) -> str:
    """The operation a request calls: ``X-Amz-Target``, the query ``Action``, the RPCv2 path, or
    (REST protocols) the operation whose HTTP binding matches the method and path."""
    target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
    if target:
        return target.rsplit(".", 1)[-1]
    params = urllib.parse.parse_qs(str(environ.get("QUERY_STRING") or ""))
    if "form-urlencoded" in str(environ.get("CONTENT_TYPE") or ""):
        params.update(urllib.parse.parse_qs(body.decode("utf-8", "replace")))
    if params.get("Action"):
        return params["Action"][0]
    m = _CBOR_PATH.match(str(environ.get("PATH_INFO") or ""))
    if m:
        return m.group(1)
    if service:
        try:
            from moto.core.request import Request
            from moto.core.routing import get_service_router

            operation, _ = get_service_router(service).match(Request(environ))
            return str(operation.name)
        except Exception:  # no operation of the model matches this method and path
            pass
    return "(unknown action)"


def _protocol(environ: dict[str, Any], service: str | None) -> str:
    """The protocol the client spoke: what its Content-Type/headers say, else the service's own."""
    if "rpc-v2-cbor" in str(environ.get("HTTP_SMITHY_PROTOCOL") or ""):
        return "cbor"
    ctype = str(environ.get("CONTENT_TYPE") or "")
    if "amz-json" in ctype or environ.get("HTTP_X_AMZ_TARGET"):
        return "json"
    if "form-urlencoded" in ctype:
        return "query"
    if service:
        import botocore.session

        try:
            protocol = str(botocore.session.get_session().get_service_model(service).protocol)
        except Exception:
            return "json"
        return {"rest-json": "json", "smithy-rpc-v2-cbor": "cbor", "ec2": "query"}.get(protocol, protocol)
    return "json"


def _cbor_text(text: str) -> bytes:
    data = text.encode()
    n = len(data)
    if n < 24:
        head = bytes([0x60 | n])
    elif n < 256:
        head = bytes([0x78, n])
    else:
        head = bytes([0x79]) + n.to_bytes(2, "big")
    return head + data


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def error_response(
    environ: dict[str, Any], code: str, message: str, status: int = 400
) -> tuple[str, list[tuple[str, str]], bytes]:
    """``(status line, headers, body)`` of an AWS error in the protocol of ``environ``'s request."""
    protocol = _protocol(environ, service_of(environ))
    request_id = str(uuid.uuid4())
    headers = [("x-amzn-RequestId", request_id), ("x-amz-request-id", request_id)]
    if protocol == "query":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse><Error><Type>Sender</Type>'
            f"<Code>{_escape(code)}</Code><Message>{_escape(message)}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>"
        ).encode()
        headers.append(("Content-Type", "text/xml"))
    elif protocol == "rest-xml":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{_escape(code)}</Code><Message>{_escape(message)}</Message>"
            f"<RequestId>{request_id}</RequestId></Error>"
        ).encode()
        headers.append(("Content-Type", "application/xml"))
    elif protocol == "cbor":
        body = (
            bytes([0xA2])
            + _cbor_text("__type")
            + _cbor_text(code)
            + _cbor_text("message")
            + _cbor_text(message)
        )
        headers += [("Content-Type", "application/cbor"), ("Smithy-Protocol", "rpc-v2-cbor")]
    else:
        body = json.dumps({"__type": code, "message": message}).encode()
        headers += [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", code)]
    headers.append(("Content-Length", str(len(body))))
    reason = {400: "Bad Request", 501: "Not Implemented"}.get(status, "Error")
    return f"{status} {reason}", headers, body


def not_implemented(environ: dict[str, Any], body: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """The answer to an action the endpoint does not implement (HTTP 501, which clients do not retry)."""
    service = service_of(environ)
    action = action_of(environ, body, service)
    message = (
        f"The SageMaker test endpoint does not implement {service or 'this service'}:{action} "
        "(docs/emulator.md lists the actions it answers)"
    )
    return error_response(environ, NOT_IMPLEMENTED, message, status=501)


# -- IAM: allow by default
def _simulate(self: Any) -> Any:
    """SimulatePrincipalPolicy / SimulateCustomPolicy: every action on every resource is allowed."""
    from moto.core.responses import ActionResult

    actions = self._get_param("ActionNames") or []
    resources = self._get_param("ResourceArns") or ["*"]
    results = [
        {
            "EvalActionName": action,
            "EvalResourceName": resource,
            "EvalDecision": "allowed",
            "MatchedStatements": [],
            "MissingContextValues": [],
        }
        for action in actions
        for resource in resources
    ]
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})


def install_iam_patches(originals: dict[str, Any]) -> None:
    """Answer the IAM calls SageMaker clients make on their way (allow by default)."""
    from moto.iam.exceptions import NotFoundException
    from moto.iam.responses import IamResponse

    originals["iam_get_role"] = IamResponse.get_role

    def get_role(self: Any) -> Any:
        name = self._get_param("RoleName")
        try:
            self.backend.get_role(name)
        except NotFoundException:  # any role exists, as a SageMaker execution role (allow by default)
            self.backend.create_role(
                role_name=name,
                assume_role_policy_document=SAGEMAKER_TRUST_POLICY,
                path="/service-role/",
                permissions_boundary=None,
                description="invented by the SageMaker test endpoint (allow by default)",
                tags=[],
                max_session_duration=None,
            )
        return originals["iam_get_role"](self)

    IamResponse.get_role = get_role  # type: ignore[method-assign]
    IamResponse.simulate_principal_policy = _simulate  # type: ignore[attr-defined]
    IamResponse.simulate_custom_policy = _simulate  # type: ignore[attr-defined]
