"""A Kubernetes API test server that the official ``kubernetes`` client talks to unchanged.

It keeps objects in memory and behaves like kube-apiserver where controllers can tell
the difference: one global resourceVersion counter, server-set metadata, optimistic
concurrency, JSON/merge/strategic merge patches, label and field selectors, paginated
lists, watches with history replay, bookmarks and 410 Expired, discovery, custom
resources pruned and validated against CRD schemas (``crdschema``), and scripted
faults (errors, latency, cut watches, compaction).

Usage::

    with ApiServer() as srv:
        core = kubernetes.client.CoreV1Api(srv.api_client())
        core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}})

Run ``python -m gitops_reloader.testing.apiserver --port 0`` for a server in its own
process; it prints ``READY <url>`` once listening and stops on SIGTERM.
"""

from .faults import Fault
from .server import ApiServer

__all__ = ["ApiServer", "Fault"]
