"""Which S3 endpoints a server's master talks to for its users' checkpoints.

The master itself sends requests to an experiment's S3 storage: checkpoint GC, `DELETE /checkpoints/{uuid}`,
`remove_files` and `GET /checkpoints/{uuid}/files`. Left to the user, `endpoint_url` would make the master send
requests wherever the user says (an address inside the master's network, a server that answers without end). On
a server (`det master up`) an s3 storage is accepted only when its `endpoint_url` is absent (AWS), an AWS S3
endpoint (`https://s3.<region>.amazonaws.com` and its variants), or one the admin lists
(`checkpoint_storage_endpoints` in the master config, `--allowed-storage-endpoint`): at submission, and again
before every request. The requests carry only the experiment's own `access_key`/`secret_key`, never the
master's AWS credentials (determined.master.storage.access). The embedded master (one user, their own machine)
accepts any endpoint.
"""
import re
import urllib.parse
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from determined import errors

_AWS_S3_HOST = re.compile(r"^s3[a-z0-9-]*(\.[a-z0-9-]+){0,3}\.amazonaws\.com(\.cn)?$")
_DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = Tuple[str, str, int]


def origin_of(url: Any) -> Origin:
    """`(scheme, host, port)` of an endpoint URL; ValueError naming what is wrong (only http(s)://host[:port])."""
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise ValueError(f"{str(url)[:200]!r} is not a URL")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ValueError(f"{url[:200]!r} is not a URL of the form http(s)://host[:port]") from None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{url[:200]!r} is not a URL of the form http(s)://host[:port]")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment \
            or parts.path not in ("", "/"):
        raise ValueError(f"{url[:200]!r} has more than a scheme, a host and a port (a path, a query or a user name)")
    return parts.scheme, parts.hostname.lower().rstrip("."), port or _DEFAULT_PORTS[parts.scheme]


def resolve_endpoints(values: Optional[Sequence[Any]]) -> List[Origin]:
    """The endpoints an admin allows (the master config's `checkpoint_storage_endpoints`); raises DeterminedError."""
    out: List[Origin] = []
    for value in values or []:
        try:
            out.append(origin_of(value))
        except ValueError as e:
            raise errors.DeterminedError(f"checkpoint_storage_endpoints: {e}; list endpoints such as "
                                         "http://minio.internal:9000") from None
    return out


def is_aws(origin: Origin) -> bool:
    scheme, host, port = origin
    return scheme == "https" and port == 443 and bool(_AWS_S3_HOST.match(host))


def endpoint_problems(checkpoint_storage: Optional[Mapping[str, Any]], allowed: Sequence[Origin]) -> List[str]:
    """Why a server's master may not send requests to this s3 storage's `endpoint_url` (empty: it may)."""
    if not checkpoint_storage or checkpoint_storage.get("type") != "s3":
        return []
    url = checkpoint_storage.get("endpoint_url")
    if url is None or url == "":
        return []
    listed = ", ".join(f"{s}://{h}:{p}" for s, h, p in allowed) or "none"
    fix = (f"this master sends S3 requests only to AWS's S3 endpoints and those its admin lists ({listed}); remove "
           "endpoint_url to use AWS, or ask the master's admin to add it (checkpoint_storage_endpoints in the "
           "master config)")
    try:
        origin = origin_of(url)
    except ValueError as e:
        return [f"checkpoint_storage.endpoint_url: {e}; {fix}"]
    if origin in allowed or is_aws(origin):
        return []
    shown = repr(url) if len(url) <= 200 else repr(url[:200]) + "..."
    return [f"checkpoint_storage.endpoint_url: {shown} is not an allowed endpoint; {fix}"]


__all__ = ["Origin", "endpoint_problems", "is_aws", "origin_of", "resolve_endpoints"]
