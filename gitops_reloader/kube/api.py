"""Raw-JSON access to the API server through the official ``kubernetes`` client.

The generated model classes cost memory and time for every object of a large list, so
lists, watches and writes go through ``ApiClient.param_serialize``/``call_api`` and are
parsed with :mod:`json` into plain dicts. Every failure is translated here, once, into the
:class:`~gitops_reloader.errors.KubeError` tree; nothing above this module sees
``ApiException`` or urllib3 errors.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from gitops_reloader.backoff import parse_retry_after
from gitops_reloader.durations import parse_rfc3339
from gitops_reloader.errors import (
    KubeConflict,
    KubeError,
    KubeGone,
    KubeNotFound,
    KubeThrottled,
)
from gitops_reloader.kube.resources import ResourceKind

log = logging.getLogger(__name__)

JSON = dict[str, Any]
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
FIELD_MANAGER = "gitops-reloader"


def field_manager(metadata: Mapping[str, Any], annotation: str) -> str:
    """The ``manager`` of the managedFields entry that owns ``annotation`` ("" if none says so):
    who set it, as the API server recorded it, never a name typed into the object."""
    for entry in metadata.get("managedFields") or ():
        fields = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {}
        if isinstance(fields, dict) and f"f:{annotation}" in fields:
            return str(entry.get("manager") or "")[:128]
    return ""


def written_by(metadata: Mapping[str, Any], manager: str) -> float:
    """When ``manager`` last changed the object (the newest ``time`` of its managedFields entries
    other than status; Unix seconds, 0: never): the API server's record, never a typed value."""
    times = [parse_rfc3339(entry.get("time")) for entry in metadata.get("managedFields") or ()
             if isinstance(entry, Mapping) and entry.get("manager") == manager
             and entry.get("subresource") != "status"]
    return max((t for t in times if t is not None), default=0.0)


def error_for_status(status: int, message: str, *, retry_after: float | None = None) -> KubeError:
    """The KubeError subclass for an HTTP status (0 = no response at all)."""
    if status == 409:
        return KubeConflict(message, status=status)
    if status == 404:
        return KubeNotFound(message, status=status)
    if status == 410:
        return KubeGone(message, status=status)
    if status == 429:
        return KubeThrottled(message, status=status, retry_after=retry_after)
    return KubeError(message, status=status, retry_after=retry_after)


def _status_message(body: bytes) -> str:
    try:
        status = json.loads(body)
        return str(status.get("message") or status.get("reason") or "")[:300]
    except (ValueError, AttributeError):
        return ""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    return parse_retry_after(headers.get("Retry-After") if headers else None, now=time.time())


class WatchStream:
    """An open watch response: iterate for events; ``close()`` works from any thread."""

    def __init__(self, response: urllib3.BaseHTTPResponse, *, what: str) -> None:
        self._response = response
        self._what = what
        self._closed = False

    def __iter__(self) -> Iterator[JSON]:
        buffer = b""
        try:
            for chunk in self._response.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as exc:
            # AttributeError: urllib3 drops its file object when closed from another thread.
            if not self._closed:
                raise KubeError(f"{self._what}: {type(exc).__name__}", status=0) from None
        finally:
            self.close()

    def close(self) -> None:
        """Stop the stream; a reader blocked in another thread returns."""
        if self._closed:
            return
        self._closed = True
        shutdown = getattr(self._response, "shutdown", None)
        try:
            if shutdown is not None:
                shutdown()
            self._response.close()
        except (RuntimeError, OSError):
            pass  # already released to the pool or closed: nothing left to stop


class KubeApi:
    """JSON in, JSON out, over an injected ``ApiClient``. Thread-safe (urllib3 pool)."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.timeout = timeout

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        serialized = self.api_client.param_serialize(
            method, path, query_params=list(query), header_params=headers, body=body,
            auth_settings=["BearerToken"],
        )
        what = f"{method} {path}"
        try:
            response = self.api_client.call_api(
                *serialized, _request_timeout=timeout if timeout is not None else self.timeout
            ).response
        except ApiException as exc:
            raise error_for_status(exc.status or 0, f"{what}: {exc.reason}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"{what}: {type(exc).__name__}: {exc}", status=0) from None
        if response.status >= 400:
            data = response.read()
            response.release_conn()
            raise error_for_status(
                response.status,
                f"{what}: {response.status} {_status_message(data)}".rstrip(),
                retry_after=_retry_after(response.headers),
            )
        return response

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> JSON:
        """Send one request and return the decoded JSON body (raises KubeError)."""
        response = self._send(method, path, query=query, body=body, content_type=content_type)
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"{method} {path}: {type(exc).__name__}", status=0) from None
        finally:
            response.release_conn()
        return json.loads(data) if data else {}

    # --- typed helpers -------------------------------------------------------------

    def list(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 500,
        continue_token: str = "",
    ) -> JSON:
        """One page of a list."""
        query: list[tuple[str, Any]] = [("limit", limit)]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if continue_token:
            query.append(("continue", continue_token))
        return self.request("GET", kind.path(namespace), query=query)

    def watch(
        self,
        kind: ResourceKind,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 300,
    ) -> WatchStream:
        """Open a watch; iterate the returned stream for events (``type``, ``object``)."""
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        # Read timeout a little over the server-side timeout: a silent stream is dead.
        response = self._send(
            "GET", kind.path(namespace), query=query, timeout=(10.0, timeout_seconds + 30.0)
        )
        return WatchStream(response, what=f"watch {kind.plural}")

    def get(self, kind: ResourceKind, namespace: str | None, name: str) -> JSON:
        return self.request("GET", kind.path(namespace, name))

    def create(self, kind: ResourceKind, namespace: str | None, body: Mapping[str, Any]) -> JSON:
        return self.request(
            "POST", kind.path(namespace), body=dict(body),
            query=[("fieldManager", FIELD_MANAGER)],
        )

    def update(self, kind: ResourceKind, namespace: str | None, name: str,
               body: Mapping[str, Any]) -> JSON:
        return self.request(
            "PUT", kind.path(namespace, name), body=dict(body),
            query=[("fieldManager", FIELD_MANAGER)],
        )

    def patch(
        self,
        kind: ResourceKind,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        content_type: str = STRATEGIC,
    ) -> JSON:
        """Patch with our field manager (Flux prunes fields owned by ``kubectl``)."""
        return self.request(
            "PATCH", kind.path(namespace, name), body=body, content_type=content_type,
            query=[("fieldManager", FIELD_MANAGER)],
        )

    def delete(self, kind: ResourceKind, namespace: str | None, name: str,
               *, propagation: str = "Background") -> JSON:
        return self.request(
            "DELETE", kind.path(namespace, name),
            body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
        )

    def discover_group(self, group: str, version: str = "") -> bool:
        """Whether the API server serves ``group`` (e.g. ``apps.openshift.io``), and ``version``."""
        try:
            self.request("GET", f"/apis/{group}/{version}" if version else f"/apis/{group}")
        except KubeNotFound:
            return False
        return True

    def _discovered(self, group_version_path: str) -> list[Mapping[str, Any]]:
        """The ``resources`` discovery lists at ``/api/v1`` or ``/apis/<group>/<version>``
        (empty when that group version is not served)."""
        try:
            doc = self.request("GET", group_version_path)
        except KubeNotFound:
            return []
        return [r for r in doc.get("resources") or () if isinstance(r, Mapping)]

    def serves(self, kind: ResourceKind) -> bool:
        """Whether discovery lists ``kind``'s resource in its group version (a CRD kind:
        whether the CRD is installed and that version served)."""
        return any(r.get("name") == kind.plural and r.get("kind") == kind.kind
                   for r in self._discovered(kind.path().rsplit("/", 1)[0]))

    def resource_of(self, api_version: str, kind: str) -> ResourceKind | None:
        """The resource discovery lists for objects of ``kind`` in ``api_version`` (an owner
        reference's), not a subresource; None when none is served."""
        group, _, version = api_version.rpartition("/")
        path = ResourceKind(group, version, "", kind).path().rsplit("/", 1)[0]
        found = next((r for r in self._discovered(path)
                      if r.get("kind") == kind and "/" not in str(r.get("name"))), None)
        return ResourceKind(group, version, str(found["name"]), kind) if found is not None else None

    def openapi_schema(self, kind: ResourceKind) -> Mapping[str, Any] | None:
        """The published OpenAPI v3 schema of ``kind`` (``/openapi/v3/apis/<group>/<version>``,
        readable by every authenticated user, as ``kubectl explain`` reads it); ``None`` when
        the server publishes none for it."""
        try:
            doc = self.request("GET", "/openapi/v3" + kind.path().rsplit("/", 1)[0])
        except KubeNotFound:
            return None
        wanted = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        for schema in ((doc.get("components") or {}).get("schemas") or {}).values():
            gvks = schema.get("x-kubernetes-group-version-kind") if isinstance(schema, Mapping) else None
            if isinstance(gvks, list) and wanted in gvks:
                return schema
        return None
