"""Which controller instance owns a namespace when the work is split by ``--shard-count``.

Placement is Lamping & Veach's jump consistent hash over the first 8 bytes of
SHA-256 of the namespace name: stable across processes and versions, even (each shard
gets 1/N of the namespaces), and minimal on resize (going from N to N+1 shards moves only
the namespaces that land on the new shard). No coordinator: each instance computes the same
answer on its own, and Kubernetes Leases give HA within a shard.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["Shard", "jump_hash", "shard_of"]

_MASK = (1 << 64) - 1


def jump_hash(key: int, buckets: int) -> int:
    """Jump consistent hash (arXiv:1406.2294) of a 64-bit ``key`` into ``buckets``."""
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    bucket, candidate = -1, 0
    while candidate < buckets:
        bucket = candidate
        key = (key * 2862933555777941757 + 1) & _MASK
        candidate = int((bucket + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return bucket


def shard_of(namespace: str, count: int) -> int:
    """The shard (``0 … count-1``) that owns ``namespace``."""
    key = int.from_bytes(hashlib.sha256(namespace.encode()).digest()[:8], "big")
    return jump_hash(key, count)


@dataclass(frozen=True, slots=True)
class Shard:
    """This instance's part of the namespaces: ``index`` of ``count``."""

    index: int = 0
    count: int = 1

    @property
    def sharded(self) -> bool:
        return self.count > 1

    def owns(self, namespace: str) -> bool:
        """Whether this instance acts on ``namespace`` (always, when not sharded)."""
        return not self.sharded or shard_of(namespace, self.count) == self.index
