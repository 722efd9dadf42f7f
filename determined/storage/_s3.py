"""Checkpoint storage in an S3 bucket (AWS, or any S3-compatible server such as MinIO) through boto3."""
import json
import pathlib
import posixpath
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar

from determined import errors
from determined.storage import _safe_tree
from determined.storage._base import StorageManager, directory_resources
from determined.storage._shared_fs import _check_id

COMPLETE_MARKER = ".det-complete"
# Files above this size go up and down in parts of this size, several parts at a time.
DEFAULT_MULTIPART_BYTES = 16 * 1024 * 1024
_DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes
_LIST_PAGE = 1000  # keys per ListObjectsV2 page
MAX_MARKER_BYTES = 64 * 1024 * 1024  # the largest completion marker read (a list of the checkpoint's files)
MAX_OBJECTS = _safe_tree.MAX_ENTRIES  # the most objects of one checkpoint listed or read

T = TypeVar("T")


class S3StorageError(errors.DeterminedError):
    """A request to the checkpoint bucket failed; the message names the bucket, the endpoint and the fix."""


def _import_boto3() -> Any:
    try:
        import boto3
    except ImportError:
        raise errors.DeterminedError(
            "checkpoint_storage type s3 needs boto3, which is not installed: run `pip install boto3` "
            "(or install this package with its `s3` extra)"
        ) from None
    return boto3


def _normalize_prefix(prefix: Optional[str]) -> str:
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise errors.DeterminedError(f"checkpoint_storage.prefix must be a string, got {prefix!r}")
    parts = [p for p in prefix.strip("/").split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise errors.DeterminedError(
            f"checkpoint_storage.prefix {prefix!r} may not contain '.' or '..' components; "
            "give a plain path such as 'team/checkpoints'"
        )
    return "/".join(parts)


class S3StorageManager(StorageManager):
    """Stores checkpoint `<id>` as the objects `<prefix>/<id>/<relative path>` of one bucket.

    An upload writes every file first and the marker object `<prefix>/<id>/.det-complete` (the checkpoint's
    resources as JSON) last: a checkpoint exists, and can be downloaded, only once its marker does. A failed
    upload writes no marker and removes what it wrote. Empty directories are kept as empty objects whose key
    ends with '/'.

    Credentials are `access_key`/`secret_key` when given, else boto3's default chain (AWS_* environment
    variables, ~/.aws, instance roles), or, with `default_credentials=False` (a server's master acting for a
    user), none: requests go unsigned rather than signed with the master's own key. `endpoint_url` points at an
    S3-compatible server (path-style addressing is used with it).
    """

    def __init__(
        self,
        bucket: str,
        access_key: Optional[str] = None,
        secret_key: Optional[str] = None,
        endpoint_url: Optional[str] = None,
        prefix: Optional[str] = None,
        *,
        multipart_bytes: int = DEFAULT_MULTIPART_BYTES,
        default_credentials: bool = True,
    ) -> None:
        if not bucket or not isinstance(bucket, str):
            raise errors.DeterminedError("checkpoint_storage.bucket is required for type s3: name an existing bucket")
        if (access_key is None) != (secret_key is None):
            given, missing = ("access_key", "secret_key") if secret_key is None else ("secret_key", "access_key")
            raise errors.DeterminedError(
                f"checkpoint_storage.{given} is set but {missing} is not: give both, or neither to use the "
                "default AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials)"
            )
        if multipart_bytes < 5 * 1024 * 1024:
            raise errors.DeterminedError("multipart_bytes must be at least 5 MiB (the smallest part S3 accepts)")
        boto3 = _import_boto3()
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.bucket = bucket
        self.endpoint_url = endpoint_url or None
        self.prefix = _normalize_prefix(prefix)
        self._explicit_keys = access_key is not None
        self._unsigned = access_key is None and not default_credentials
        session = boto3.session.Session(aws_access_key_id=access_key, aws_secret_access_key=secret_key)
        unsigned = {}
        if self._unsigned:
            from botocore import UNSIGNED

            unsigned = {"signature_version": UNSIGNED}
        config = Config(
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=10,
            read_timeout=120,
            s3={"addressing_style": "path"} if self.endpoint_url else None,
            **unsigned,
        )
        # Without a configured region, us-east-1 works for any bucket (S3 redirects) and for S3-compatible servers.
        region = session.region_name or "us-east-1"
        self._client = session.client("s3", endpoint_url=self.endpoint_url, region_name=region, config=config)
        self._transfer = TransferConfig(
            multipart_threshold=multipart_bytes, multipart_chunksize=multipart_bytes, max_concurrency=8
        )

    def __repr__(self) -> str:
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"S3StorageManager(bucket={self.bucket!r}, prefix={self.prefix!r}{where})"

    # -- keys ------------------------------------------------------------------------------------------

    def key_prefix(self, storage_id: str) -> str:
        """The prefix of every object of checkpoint `storage_id`, ending with '/'."""
        _check_id(storage_id)
        return f"{self.prefix}/{storage_id}/" if self.prefix else f"{storage_id}/"

    def _marker_key(self, storage_id: str) -> str:
        return self.key_prefix(storage_id) + COMPLETE_MARKER

    # -- the interface ---------------------------------------------------------------------------------

    def upload(self, src_dir: str, storage_id: str) -> None:
        src = pathlib.Path(src_dir)
        if not src.is_dir():
            raise errors.DeterminedError(f"cannot upload checkpoint {storage_id}: {src_dir!r} is not a directory")
        base = self.key_prefix(storage_id)
        resources = directory_resources(str(src))
        if COMPLETE_MARKER in resources:
            raise errors.DeterminedError(
                f"cannot upload checkpoint {storage_id}: its top directory holds a file named {COMPLETE_MARKER!r}, "
                "a name the s3 storage reserves; rename that file"
            )
        if self.exists(storage_id):
            raise errors.DeterminedError(
                f"checkpoint {storage_id} already exists in {self._where()}; every checkpoint needs a new uuid"
            )
        try:
            for rel in resources:
                if rel.endswith("/"):
                    self._call("store", lambda: self._client.put_object(Bucket=self.bucket, Key=base + rel, Body=b""))
                else:
                    local = str(src / rel)
                    self._call(
                        "store",
                        lambda: self._client.upload_file(local, self.bucket, base + rel, Config=self._transfer),
                    )
            body = json.dumps({"resources": resources}, sort_keys=True).encode()
            self._call("store", lambda: self._client.put_object(Bucket=self.bucket, Key=base + COMPLETE_MARKER, Body=body))
        except BaseException:
            self._remove_objects(storage_id, quiet=True)
            raise

    def add_files(self, src_dir: str, storage_id: str) -> None:
        src = pathlib.Path(src_dir)
        if not src.is_dir():
            raise errors.DeterminedError(f"cannot add files to {storage_id}: {src_dir!r} is not a directory")
        base = self.key_prefix(storage_id)
        for rel in directory_resources(str(src)):
            if not rel.endswith("/"):  # an S3 object is written whole; folders exist through their objects
                local = str(src / rel)
                self._call("store",
                           lambda: self._client.upload_file(local, self.bucket, base + rel, Config=self._transfer))

    def download(self, storage_id: str, dst_dir: str, *, completed: bool = False) -> None:
        """Download checkpoint `storage_id` into `dst_dir`: the files its marker lists, checked by size.

        Without a marker the checkpoint is refused ("not in storage"): objects without it are an upload of this
        platform that is in progress or died before cleaning up. `completed=True` says the caller has read the
        checkpoint's record and it is COMPLETED (or PARTIALLY_DELETED): then a missing marker means a checkpoint
        that Determined wrote (its S3 storage never wrote this platform's marker; `det import determined` points at
        such checkpoints), and the files are those its prefix lists, with their listed sizes. This is safe because
        this platform reports a checkpoint COMPLETED only after its upload wrote the marker, so no record of an
        upload in progress or failed is COMPLETED. An empty prefix is "not in storage" either way; `exists()`
        still wants the marker."""
        resources = self._read_marker(storage_id, fallback=self._listed_resources if completed else None)
        base = self.key_prefix(storage_id)
        dst = pathlib.Path(dst_dir)
        dst.mkdir(parents=True, exist_ok=True)
        for rel, size in resources.items():
            target = _inside(dst, rel)
            if rel.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            self._call(
                "read",
                lambda: self._client.download_file(self.bucket, base + rel, str(target), Config=self._transfer),
                missing=f"checkpoint {storage_id} is incomplete in {self._where()}: {rel!r} is missing",
            )
            got = target.stat().st_size
            if got != size:
                raise S3StorageError(
                    f"checkpoint {storage_id} in {self._where()} is damaged: {rel!r} has {got} bytes, "
                    f"{size} were stored"
                )

    def read_files(self, storage_id: str, *, completed: bool = False) -> Iterator[_safe_tree.Entry]:
        """The checkpoint's files streamed object by object (nothing written locally): each read as exactly the
        size its marker (or listing) gives, never more; an object whose size differs is an error."""
        resources = self._read_marker(storage_id, fallback=self._listed_resources if completed else None)
        base = self.key_prefix(storage_id)
        for rel, size in sorted(resources.items()):
            clean = _relative(rel)
            if rel.endswith("/"):
                if clean:
                    yield _safe_tree.Entry(clean, _safe_tree.DIR)
                continue
            yield _safe_tree.Entry(clean, _safe_tree.FILE, size=size, open=self._opener(storage_id, base + rel, size))

    def _opener(self, storage_id: str, key: str, size: int) -> Callable[[], Any]:
        def open_object() -> Any:
            answer = self._call("read", lambda: self._client.get_object(Bucket=self.bucket, Key=key),
                                missing=f"checkpoint {storage_id} is incomplete in {self._where()}: {key!r} is missing")
            length = answer.get("ContentLength")
            if length is not None and int(length) != size:
                answer["Body"].close()
                raise S3StorageError(f"checkpoint {storage_id} in {self._where()} is damaged: {key!r} has {length} "
                                     f"bytes, {size} were stored")
            return _SizedBody(answer["Body"], size, f"checkpoint {storage_id}: {key!r}")

        return open_object

    def delete(self, storage_id: str) -> None:
        self._remove_objects(storage_id, quiet=False)

    def exists(self, storage_id: str) -> bool:
        # A GET, not a HEAD: a HEAD's bare 404 cannot tell a missing marker from a missing bucket.
        key = self._marker_key(storage_id)
        try:
            answer = self._call("read", lambda: self._client.get_object(Bucket=self.bucket, Key=key), missing="")
        except _Missing:
            return False
        answer["Body"].close()
        return True

    # -- helpers ---------------------------------------------------------------------------------------

    def _listed_resources(self, storage_id: str) -> Dict[str, int]:
        """The checkpoint's files as its prefix lists them (relative path -> size); empty when there are none."""
        base = self.key_prefix(storage_id)
        return {obj["Key"][len(base):]: int(obj.get("Size") or 0) for obj in self._listed(base)
                if obj["Key"] != base and obj["Key"][len(base):] != COMPLETE_MARKER}

    def _listed(self, key_prefix: str) -> List[Dict[str, Any]]:
        """The objects under `key_prefix`, at most MAX_OBJECTS (more is an error: no checkpoint has that many)."""
        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=key_prefix, PaginationConfig={"PageSize": _LIST_PAGE})

        def collect() -> List[Dict[str, Any]]:
            found: List[Dict[str, Any]] = []
            for page in pages:
                found.extend(page.get("Contents") or [])
                if len(found) > MAX_OBJECTS:
                    raise S3StorageError(f"{self._where()} lists more than {MAX_OBJECTS} objects under "
                                         f"{key_prefix!r}; that is not one checkpoint, nothing is read or deleted")
            return found

        return self._call("list", collect)

    def _read_marker(self, storage_id: str,
                     fallback: Optional[Callable[[str], Dict[str, int]]] = None) -> Dict[str, int]:
        """The resources the marker lists; without a marker, `fallback`'s (when it finds any files)."""
        key = self._marker_key(storage_id)
        if fallback is not None:
            try:
                answer = self._call("read", lambda: self._client.get_object(Bucket=self.bucket, Key=key), missing="")
            except _Missing:
                listed = fallback(storage_id)
                if listed:
                    return listed
                return self._read_marker(storage_id)  # the error that says what is missing
            return self._marker_resources(storage_id, key, answer)
        answer = self._call(
            "read",
            lambda: self._client.get_object(Bucket=self.bucket, Key=key),
            missing=(
                f"checkpoint {storage_id} is not in storage: {self._where()} has no complete checkpoint under "
                f"{self.key_prefix(storage_id)!r} (no {COMPLETE_MARKER} marker: it was never stored, its upload "
                "failed, or it was deleted)"
            ),
        )
        return self._marker_resources(storage_id, key, answer)

    def _marker_resources(self, storage_id: str, key: str, answer: Dict[str, Any]) -> Dict[str, int]:
        try:
            body = answer["Body"].read(MAX_MARKER_BYTES + 1)
            answer["Body"].close()
            if len(body) > MAX_MARKER_BYTES:
                raise S3StorageError(f"the marker {key!r} of checkpoint {storage_id} in {self._where()} is larger than "
                                     f"{MAX_MARKER_BYTES} bytes; the checkpoint cannot be trusted: delete it")
            resources = json.loads(body)["resources"]
            if len(resources) > MAX_OBJECTS:
                raise ValueError("too many files")
            out = {str(k): int(v) for k, v in resources.items()}
            if any(v < 0 for v in out.values()):
                raise ValueError("a negative size")
            return out
        except (ValueError, KeyError, TypeError, AttributeError):
            raise S3StorageError(
                f"the marker {key!r} of checkpoint {storage_id} in {self._where()} is not valid JSON resources; "
                "the checkpoint cannot be trusted: delete it"
            ) from None

    def _remove_objects(self, storage_id: str, quiet: bool) -> None:
        """Delete every object of `storage_id`, the marker first; with `quiet`, errors are swallowed."""
        try:
            base = self.key_prefix(storage_id)
            self._call("delete", lambda: self._client.delete_object(Bucket=self.bucket, Key=base + COMPLETE_MARKER))
            for batch in self._key_batches(base):
                answer = self._call(
                    "delete",
                    lambda: self._client.delete_objects(
                        Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                    ),
                )
                failed = answer.get("Errors") or []
                if failed:
                    first = failed[0]
                    raise S3StorageError(
                        f"could not delete {len(failed)} object(s) of checkpoint {storage_id} from {self._where()}, "
                        f"e.g. {first.get('Key')!r}: {first.get('Code')}: {first.get('Message')}; "
                        "check that the credentials may s3:DeleteObject"
                    )
        except Exception:
            if not quiet:
                raise

    def _key_batches(self, key_prefix: str) -> Iterator[List[str]]:
        keys = [obj["Key"] for obj in self._listed(key_prefix)]
        for i in range(0, len(keys), _DELETE_BATCH):
            yield keys[i : i + _DELETE_BATCH]

    def _where(self) -> str:
        endpoint = self.endpoint_url or "the default AWS S3 endpoint"
        return f"bucket {self.bucket!r} at {endpoint}"

    def _call(self, action: str, fn: Callable[[], T], missing: Optional[str] = None) -> T:
        """Run one boto3 call; botocore's errors become S3StorageError (or _Missing for a 404 when `missing`)."""
        try:
            return fn()
        except errors.DeterminedError:
            raise
        except Exception as e:
            code, status = _error_code(e)
            if missing is not None and code in ("404", "NoSuchKey", "NotFound"):
                if missing:
                    raise S3StorageError(missing) from None
                raise _Missing() from None
            raise S3StorageError(self._explain(action, e, code, status)) from None

    def _explain(self, action: str, e: BaseException, code: Optional[str], status: Optional[int]) -> str:
        where = self._where()
        creds = (
            "check checkpoint_storage.access_key / secret_key"
            if self._explicit_keys
            else "the master sends no credentials of its own for an experiment's storage: set "
            "checkpoint_storage.access_key / secret_key"
            if self._unsigned
            else "check the AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials) or set "
            "checkpoint_storage.access_key / secret_key"
        )
        kind = _exception_name(e)
        if kind == "NoCredentialsError":
            return (f"cannot {action} checkpoints in {where}: no AWS credentials were found; set "
                    "checkpoint_storage.access_key and secret_key, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
        if kind in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError",
                    "ProxyConnectionError", "SSLError"):
            return (f"cannot {action} checkpoints in {where}: the endpoint cannot be reached ({e}); check "
                    "checkpoint_storage.endpoint_url and that the S3 server is running and reachable")
        if kind == "ParamValidationError":
            return f"cannot {action} checkpoints in {where}: {e}; check checkpoint_storage.bucket and prefix"
        if code == "NoSuchBucket":
            return (f"cannot {action} checkpoints in {where}: the bucket does not exist; create the bucket or fix "
                    "checkpoint_storage.bucket")
        if code in ("InvalidAccessKeyId", "InvalidClientTokenId"):
            return f"cannot {action} checkpoints in {where}: the access key is not known to the server; {creds}"
        if code == "SignatureDoesNotMatch":
            return (f"cannot {action} checkpoints in {where}: the secret key does not match the access key; "
                    f"{creds}")
        if code in ("AccessDenied", "AllAccessDisabled", "403") or status == 403:
            return (f"cannot {action} checkpoints in {where}: access denied (wrong credentials, or they lack "
                    f"s3:GetObject/PutObject/DeleteObject/ListBucket on the bucket); {creds}")
        if code in ("InvalidBucketName",):
            return f"cannot {action} checkpoints in {where}: invalid bucket name; fix checkpoint_storage.bucket"
        detail = f"{code}: {e}" if code else f"{kind}: {e}"
        return f"cannot {action} checkpoints in {where}: {detail}"


class _Missing(Exception):
    """The object asked for does not exist (a 404)."""


def _error_code(e: BaseException) -> "tuple[Optional[str], Optional[int]]":
    """The S3 error code and HTTP status of a botocore ClientError found in `e` or what it was raised from."""
    seen = 0
    cur: Optional[BaseException] = e
    while cur is not None and seen < 5:
        response = getattr(cur, "response", None)
        if isinstance(response, dict) and "Error" in response:
            code = response["Error"].get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return (str(code) if code is not None else None), status
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return None, None


def _exception_name(e: BaseException) -> str:
    """The name of the first botocore exception class in the chain of `e` (boto3 wraps some of them)."""
    cur: Optional[BaseException] = e
    for _ in range(5):
        if cur is None:
            break
        if type(cur).__module__.startswith(("botocore", "urllib3")):
            return type(cur).__name__
        cur = cur.__cause__ or cur.__context__
    return type(e).__name__


class _SizedBody:
    """An object's body read as exactly `size` bytes: never more (the rest is not read), an error if shorter."""

    def __init__(self, body: Any, size: int, what: str) -> None:
        self._body = body
        self._left = size
        self._what = what

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        want = self._left if n is None or n < 0 else min(n, self._left)
        data = self._body.read(want)
        if not data:
            raise S3StorageError(f"{self._what} ended {self._left} bytes short of its stored size")
        self._left -= len(data)
        return bytes(data)

    def close(self) -> None:
        self._body.close()

    def __enter__(self) -> "_SizedBody":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _relative(rel: str) -> str:
    """A stored object's path relative to its checkpoint, refused when it would leave the checkpoint."""
    clean = posixpath.normpath(rel.rstrip("/")) if rel.rstrip("/") else "."
    if clean.startswith("../") or clean == ".." or posixpath.isabs(clean):
        raise S3StorageError(f"refusing to read {rel!r}: the path leaves the checkpoint directory")
    return "" if clean == "." else clean


def _inside(root: pathlib.Path, rel: str) -> pathlib.Path:
    """`root/rel`, refusing a relative path that would leave `root`."""
    clean = posixpath.normpath(rel.rstrip("/"))
    if clean.startswith("../") or clean == ".." or posixpath.isabs(clean):
        raise S3StorageError(f"refusing to download {rel!r}: the path leaves the checkpoint directory")
    return root / pathlib.Path(*clean.split("/")) if clean != "." else root


__all__ = ["S3StorageManager", "S3StorageError", "COMPLETE_MARKER"]
