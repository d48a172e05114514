"""CRD schemas in the API test server: load time per server start, admission time per object.

Kinds: Kustomization and HelmRelease (Flux), Application with five sources and a hydrator
(Argo CD), Rollout with three containers (Argo Rollouts), and with the same pod template a
Knative Service and an OpenKruise CloneSet.

    python bench/crd_admission.py            # 2,000 admissions per kind, 20 loads
    python bench/crd_admission.py --quick    # 200 admissions, 5 loads

Needs the CRDs of ``.ci/install-tools.sh`` in ``.tools/crds`` (or $GITOPS_RELOADER_TEST_CRDS).
Prints a table; the last line is one JSON object with the figures.
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitops_reloader.testing.apiserver import crdschema
from gitops_reloader.testing.apiserver.crdschema import CrdSchemas, default_crd_paths

KUSTOMIZATION: dict[str, Any] = {
    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
    "kind": "Kustomization",
    "metadata": {"name": "apps", "namespace": "flux-system"},
    "spec": {
        "interval": "10m",
        "path": "./apps",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        "patches": [{"patch": "- op: add", "target": {"kind": "Deployment", "name": "web"}}] * 5,
        "postBuild": {"substitute": {f"VAR_{i}": str(i) for i in range(20)}},
    },
}
HELM_RELEASE: dict[str, Any] = {
    "apiVersion": "helm.toolkit.fluxcd.io/v2",
    "kind": "HelmRelease",
    "metadata": {"name": "web", "namespace": "apps"},
    "spec": {
        "interval": "5m",
        "chart": {"spec": {"chart": "./charts/web", "sourceRef": {"kind": "GitRepository", "name": "fleet"}}},
        "values": {"replicas": 3, "env": [{"name": f"E{i}", "value": "x" * 40} for i in range(50)]},
    },
}

FLEET = "https://git.example.com/platform/fleet.git"
APPLICATION: dict[str, Any] = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Application",
    "metadata": {"name": "web", "namespace": "argocd"},
    "spec": {
        "project": "default",
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"},
        "sources": [
            {
                "repoURL": FLEET,
                "path": f"apps/web-{i}",
                "targetRevision": "main",
                "helm": {"valueFiles": [f"$values/envs/prod/web-{i}.yaml"], "valuesObject": {"replicas": i}},
            }
            for i in range(5)
        ]
        + [{"repoURL": FLEET, "targetRevision": "main", "ref": "values"}],
        "sourceHydrator": {
            "drySource": {"repoURL": FLEET, "path": "dry/web", "targetRevision": "main"},
            "syncSource": {"targetBranch": "env/prod", "path": "hydrated/web"},
        },
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            "syncOptions": ["CreateNamespace=true"],
        },
    },
}
ROLLOUT: dict[str, Any] = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Rollout",
    "metadata": {"name": "web", "namespace": "apps"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {
                        "name": f"c{i}",
                        "image": "nginx:1.27",
                        "ports": [{"containerPort": 8080 + i}],
                        "env": [{"name": f"E{j}", "value": "x" * 40} for j in range(10)],
                    }
                    for i in range(3)
                ]
            },
        },
        "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {"duration": "1m"}}]}},
    },
}


KNATIVE_SERVICE: dict[str, Any] = {
    "apiVersion": "serving.knative.dev/v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "apps"},
    "spec": {"template": ROLLOUT["spec"]["template"]},
}
CLONESET: dict[str, Any] = {
    "apiVersion": "apps.kruise.io/v1alpha1",
    "kind": "CloneSet",
    "metadata": {"name": "web", "namespace": "apps"},
    "spec": {"replicas": 3, "selector": ROLLOUT["spec"]["selector"], "template": ROLLOUT["spec"]["template"],
             "updateStrategy": {"type": "InPlaceIfPossible", "maxUnavailable": "20%"}},
}


def per_call_ms(fn: Any, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def pure_python_yaml_load(paths: list[Path]) -> None:
    """The previous loader: the Flux files through PyYAML's pure-Python SafeLoader."""
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("fluxcd/*.json")):
                list(yaml.safe_load_all(file.read_text()))


def main() -> int:
    quick = "--quick" in sys.argv
    admissions, loads = (200, 5) if quick else (2000, 20)
    paths = default_crd_paths()
    schemas = CrdSchemas.load(paths)
    if not (
        schemas.get("kustomize.toolkit.fluxcd.io", "v1", "Kustomization")
        and schemas.get("argoproj.io", "v1alpha1", "Application")
    ):
        print("no Flux or Argo CRDs: run `bash .ci/install-tools.sh`")
        return 1

    def cold() -> None:
        crdschema._FILE_CACHE.clear()
        CrdSchemas.load(paths)

    rows = {
        "load Flux CRDs, pure-Python YAML (before)": per_call_ms(lambda: pure_python_yaml_load(paths), loads),
        "load all CRDs, cold (json / C loader)": per_call_ms(cold, loads),
        "load all CRDs, cached (next start)": per_call_ms(lambda: CrdSchemas.load(paths), loads),
    }
    for obj in (KUSTOMIZATION, HELM_RELEASE, APPLICATION, ROLLOUT, KNATIVE_SERVICE, CLONESET):
        group, version = obj["apiVersion"].split("/")
        rows[f"admit one {obj['kind']}"] = per_call_ms(
            lambda o=obj, g=group, v=version: schemas.admit(g, v, o["kind"], "x", copy.deepcopy(o)),
            admissions,
        )
    print(f"{'operation':<40} {'median ms':>10}")
    for name, ms in rows.items():
        print(f"{name:<40} {ms:>10.3f}")
    print(json.dumps({name: round(ms, 4) for name, ms in rows.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
