"""The HMAC key behind every digest the git sink writes (DESIGN contract 2).

The key lives only in the cluster, in a Secret (``--digest-key-secret``, in the
controller's namespace), under the data key ``digest-key``. On first start the Secret
does not exist: one replica creates it with 32 random bytes. When two replicas race, the
API server accepts one create and answers ``409`` to the other, which then reads the
winner's key — so every replica digests with the same key and a fail-over never causes
a mass re-commit.

A Secret that exists but has no (or an empty) ``digest-key`` entry is a configuration
error: it is never overwritten, because changing the key changes every digest in git.

With ``create=False`` (``--dry-run``, which writes nothing to the cluster) a missing
Secret is not created: a key held only in memory stands in, so the digests computed
differ from the ones a real run would write, and every located manifest looks out of
date. This is logged once.

The key is never logged, never put in an exception message, and hidden from ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import logging
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from gitops_reloader.errors import ConfigError, KubeConflict, KubeNotFound
from gitops_reloader.hashing import keyed_digest
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import SECRETS

__all__ = ["DIGEST_KEY_FIELD", "DigestKey", "DigestKeyStore", "load_or_create_digest_key"]

log = logging.getLogger(__name__)

DIGEST_KEY_FIELD = "digest-key"
"""The Secret data key holding the HMAC key."""
_KEY_BYTES = 32
_MIN_KEY_BYTES = 16


@dataclass(frozen=True, slots=True)
class DigestKey:
    """An HMAC key; ``repr`` never shows it."""

    value: bytes = field(repr=False)

    def digest(self, sources: Iterable[tuple[str, str]]) -> str:
        """:func:`~gitops_reloader.hashing.keyed_digest` of ``(source id, hash)`` pairs."""
        return keyed_digest(self.value, sources)


def load_or_create_digest_key(api: KubeApi, *, namespace: str, name: str) -> DigestKey:
    """Read the key from Secret ``namespace/name``, creating the Secret if it is missing.

    Raises :class:`~gitops_reloader.errors.ConfigError` when the Secret exists without a
    usable ``digest-key``, and :class:`~gitops_reloader.errors.KubeError` (retryable)
    when the API server can't be reached.
    """
    try:
        return _read(api, namespace, name)
    except KubeNotFound:
        pass
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gitops-reloader"},
            "annotations": {
                "gitops-reloader.io/purpose": "HMAC key for digests written to git; "
                "changing it re-commits every workload on its next change",
            },
        },
        "type": "Opaque",
        "data": {DIGEST_KEY_FIELD: base64.b64encode(secrets.token_bytes(_KEY_BYTES)).decode("ascii")},
    }
    where = {"object": f"{namespace}/Secret/{name}"}
    try:
        api.create(SECRETS, namespace, body)
    except KubeConflict:
        log.info("digest key secret created by another replica", extra=where)
    else:
        log.info("digest key secret created", extra=where)
    # Read back in both cases: the stored key is the one every replica uses.
    return _read(api, namespace, name)


def _read(api: KubeApi, namespace: str, name: str) -> DigestKey:
    secret = api.get(SECRETS, namespace, name)
    where = f"digest key secret {namespace}/{name}"
    encoded = (secret.get("data") or {}).get(DIGEST_KEY_FIELD)
    if not isinstance(encoded, str) or not encoded:
        raise ConfigError(f"{where} has no {DIGEST_KEY_FIELD!r} entry; add one or delete the secret")
    try:
        value = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where}: {DIGEST_KEY_FIELD!r} is not valid base64") from None
    if len(value) < _MIN_KEY_BYTES:
        raise ConfigError(f"{where}: {DIGEST_KEY_FIELD!r} is shorter than {_MIN_KEY_BYTES} bytes")
    return DigestKey(value)


class DigestKeyStore:
    """Loads the key once, on first use, and keeps it (thread-safe).

    Lazy so that the controller starts even while the API server is briefly
    unavailable; a failed load raises and is tried again on the next call.
    """

    def __init__(self, api: KubeApi, *, namespace: str, name: str, create: bool = True) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.create = create
        self._key: DigestKey | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DigestKeyStore({self.namespace}/{self.name}, loaded={self._key is not None})"

    def get(self) -> DigestKey:
        """The key (loaded or created on the first call)."""
        with self._lock:
            if self._key is None:
                self._key = (load_or_create_digest_key(self.api, namespace=self.namespace, name=self.name)
                             if self.create else self._read_or_stand_in())
            return self._key

    def _read_or_stand_in(self) -> DigestKey:
        key = read_digest_key(self.api, namespace=self.namespace, name=self.name)
        if key is None:
            log.warning("digest key secret missing and not created (dry run); using a key held in "
                        "memory: every located manifest will look out of date",
                        extra={"object": f"{self.namespace}/Secret/{self.name}"})
            return DigestKey(secrets.token_bytes(_KEY_BYTES))
        return key


def read_digest_key(api: KubeApi, *, namespace: str, name: str) -> DigestKey | None:
    """The stored key, or None while the Secret does not exist (read only: never creates it)."""
    try:
        return _read(api, namespace, name)
    except KubeNotFound:
        return None
