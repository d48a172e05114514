"""Bytes the controller keeps per cached object, by kind (tracemalloc, in-process).

N objects of each kind go through the controller's own informer transforms into a
``Store`` (and, for workloads, the ``ReferenceIndex``), the way an initial list does; the
figure is the memory still allocated afterwards divided by N. The raw JSON is prepared
before measuring, so only what is kept counts. Objects are shaped like the API server's:
server-set metadata, two labels, an annotation the policy reads.

    python bench/objects.py           # 20,000 of each kind
    python bench/objects.py --quick   # 2,000 of each kind

``bench/memory.py`` measures the same thing from the outside (RSS of the real process).
``deployment_keys_bytes``: a Deployment reading two keys through ``configMapKeyRef``
(what key-level reload keeps on top: its used-key map). Last line: one JSON object with
secret_bytes, configmap_bytes, deployment_bytes, deployment_keys_bytes.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import configmap_body, deployment_body, scenario_main
from gitops_reloader.config import AnnotationKeys
from gitops_reloader.control.caches import source_transform
from gitops_reloader.index import ReferenceIndex
from gitops_reloader.kube.store import Store, object_key
from gitops_reloader.kube.workloads import DeploymentAdapter
from gitops_reloader.model import SourceKind, WorkloadKey
from gitops_reloader.state.shards import STORE_LABEL

KEYS = AnnotationKeys()


def _metadata(raw: dict[str, Any], i: int) -> dict[str, Any]:
    raw["metadata"].update(resourceVersion=str(1000 + i), uid=f"{i:08x}-5f1c-4bd1-9a57-0e3c1d2b4a6f",
                           creationTimestamp="2026-11-24T06:00:00Z")
    raw["metadata"].setdefault("labels", {}).update({"app.kubernetes.io/name": f"svc-{i % 500}",
                                                     "app.kubernetes.io/part-of": "shop"})
    return raw


def _texts(n: int) -> dict[str, list[str]]:
    payload = base64.b64encode(os.urandom(2048)).decode()
    secrets = [_metadata({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": f"s-{i}", "namespace": "bench"},
                          "data": {"blob": payload[:-8] + f"{i:08d}"}}, i) for i in range(n)]
    configmaps = [_metadata(configmap_body(f"cfg-{i}", {"v": str(i), "text": "x" * 512}), i)
                  for i in range(n)]
    for cm in configmaps[::10]:
        cm["metadata"]["annotations"] = {KEYS.match: "true"}
    deployments = [_metadata(deployment_body(f"web-{i}", f"cfg-{i}"), i) for i in range(n)]
    key_readers = [_metadata(_key_reader(f"keys-{i}", f"cfg-{i}"), i) for i in range(n)]
    return {kind: [json.dumps(o) for o in objs] for kind, objs in
            (("secret", secrets), ("configmap", configmaps), ("deployment", deployments),
             ("deployment_keys", key_readers))}


def _key_reader(name: str, configmap: str) -> dict[str, Any]:
    """A Deployment reading two keys of its ConfigMap (configMapKeyRef), for key-level reload."""
    body = deployment_body(name, configmap)
    container = body["spec"]["template"]["spec"]["containers"][0]
    del container["envFrom"]
    container["env"] = [{"name": key.upper(),
                         "valueFrom": {"configMapKeyRef": {"name": configmap, "key": key}}}
                        for key in ("v", "text")]
    return body


def _kept(texts: list[str], keep: Callable[[dict[str, Any]], None]) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for text in texts:
        keep(json.loads(text))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / len(texts)


def run_once(quick: bool) -> dict[str, float]:
    n = 2000 if quick else 20_000
    texts = _texts(n)
    results: dict[str, float] = {}
    for kind, source_kind in (("secret", SourceKind.SECRET), ("configmap", SourceKind.CONFIGMAP)):
        store: Store[Any] = Store()
        transform = source_transform(source_kind, (KEYS.ignore, KEYS.match), lambda: False,
                                     label_keys=(STORE_LABEL,))

        def keep_source(raw: dict[str, Any], store: Store[Any] = store,
                        transform: Callable[[dict[str, Any]], Any] = transform) -> None:
            meta = transform(raw)
            store.upsert(object_key(meta.ref.namespace, meta.ref.name), meta.resource_version, meta)

        results[f"{kind}_bytes"] = round(_kept(texts[kind], keep_source))
        del store
    workloads: Store[Any] = Store()
    index = ReferenceIndex()
    adapter = DeploymentAdapter()

    def keep_workload(raw: dict[str, Any]) -> None:
        record = adapter.record(raw)
        workloads.upsert(object_key(record.ref.namespace, record.ref.name),
                         raw["metadata"]["resourceVersion"], record)
        index.update(WorkloadKey(record.ref.key), record.ref.namespace, record.refs, explicit=False)

    results["deployment_bytes"] = round(_kept(texts["deployment"], keep_workload))
    workloads, index = Store(), ReferenceIndex()
    results["deployment_keys_bytes"] = round(_kept(texts["deployment_keys"], keep_workload))
    return results


def main() -> int:
    return scenario_main(__doc__ or "", "objects.py",
                         "bytes kept per cached object (tracemalloc; quick 2,000, full 20,000 of each)",
                         run_once)


if __name__ == "__main__":
    raise SystemExit(main())
