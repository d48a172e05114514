"""The git sink at repository scale: scan index build, incremental refresh, one batch commit.

A manifest repository of N generated files (each a Deployment and a Service with
comments, in ``apps/team-XX/``) is served over HTTP by the git host test server
(``git http-backend``, token auth, 127.0.0.1).

1. **Cold index**: clone, then build the scan index over every YAML file.
2. **Incremental index**: someone else commits a change to 10 files; sync and refresh the
   index from the changed paths only.
3. **Batch**: the API test server (own process) holds W Deployments on the git sink,
   each reloading on its own ConfigMap; the controller runs in-process with the git sink
   injected (``--coalesce-window=3s``). All W ConfigMaps change at once; the clock stops
   when the commit is on the server. ``batch_commit_push_s`` is the git sink's
   ``emit_batch`` duration for that window (sync, locate W manifests, edit, one commit,
   push), read from the ``emit_duration_seconds`` histogram; the table also shows the
   wall time from the last ConfigMap write to the pushed commit (window included).

    python bench/git_sink.py            # 5,000 files, 200 workloads
    python bench/git_sink.py --quick    # 1,000 files, 50 workloads (< 1 min)

The last line is one JSON object: index_cold_s, index_incremental_s,
batch_commit_push_s, commits_for_batch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import api_for, apiserver_process, configmap_body, create_all, print_table
from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.gitops.gitconfig import parse_git_config
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.sinks.gitwiring import build_git_sink, build_repository_handles
from gitops_reloader.testing.githost import GitHostServer

TOKEN = "bench-git-token"
REPO = "bench"
NAMESPACE = "bench"
WINDOW_S = 3.0


def manifest_path(i: int) -> str:
    return f"apps/team-{i % 50:02d}/svc-{i:05d}.yaml"


def manifest(i: int, replicas: int = 2) -> str:
    name = f"svc-{i:05d}"
    return textwrap.dedent(f"""\
        # {name}: generated for the git sink benchmark.
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
          namespace: {NAMESPACE}
          labels:
            app: {name}
            team: team-{i % 50:02d}
        spec:
          replicas: {replicas}   # scaled by hand
          selector:
            matchLabels:
              app: {name}
          template:
            metadata:
              labels:
                app: {name}
              annotations:
                prometheus.io/scrape: "true"
            spec:
              containers:
                - name: app
                  image: registry.example.com/{name}:1.0.{i}
                  ports:
                    - containerPort: 8080
                  envFrom:
                    - configMapRef:
                        name: cfg-{i:05d}
        ---
        apiVersion: v1
        kind: Service
        metadata:
          name: {name}
          namespace: {NAMESPACE}
        spec:
          selector:
            app: {name}
          ports:
            - port: 80
              targetPort: 8080
        """)


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
           "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)


def seed_repository(host: GitHostServer, tmp: Path, files: int) -> str:
    """Write ``files`` manifests, commit them in a scratch repo, clone it bare into the host."""
    seed = tmp / "seed"
    for i in range(files):
        path = seed / manifest_path(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(manifest(i))
    (seed / "README.md").write_text("# generated manifests\n")
    git(seed, "init", "--quiet", "--initial-branch=main")
    git(seed, "add", "--all")
    git(seed, "commit", "--quiet", "--no-gpg-sign", "-m", "initial")
    bare = host.bare_path(REPO)
    bare.parent.mkdir(parents=True, exist_ok=True)
    git(tmp, "clone", "--quiet", "--bare", str(seed), str(bare))
    return host.repo_url(REPO)


def write_git_config(tmp: Path, url: str) -> Path:
    token = tmp / "token"
    token.write_text(TOKEN)
    config = tmp / "git-config.yaml"
    config.write_text(f"repositories:\n  - name: {REPO}\n    url: {url}\n    tokenFile: {token}\n")
    return config


def measure_index(config_path: Path, tmp: Path, host: GitHostServer) -> dict[str, float]:
    handle = build_repository_handles(parse_git_config(config_path.read_text()), tmp / "index-cache")[REPO]
    started = time.perf_counter()
    head = handle.repo.sync()
    clone_s = time.perf_counter() - started
    cold = handle.index.refresh(head)
    documents = len(handle.index)
    host.commit_directly(REPO, {manifest_path(i): manifest(i, replicas=3) for i in range(0, 10 * 37, 37)},
                         message="scale ten services")
    started = time.perf_counter()
    head = handle.repo.sync()
    fetch_s = time.perf_counter() - started
    incremental = handle.index.refresh(head)
    return {"clone_s": clone_s, "index_cold_s": cold.seconds, "cold_files": cold.files_read,
            "documents": documents, "fetch_s": fetch_s, "index_incremental_s": incremental.seconds,
            "incremental_files": incremental.files_read}


def measure_batch(config_path: Path, tmp: Path, host: GitHostServer, workloads: int) -> dict[str, Any]:
    with apiserver_process(tmp) as (_, kubeconfig):
        api = api_for(kubeconfig)
        create_all(api, [(f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                          configmap_body(f"cfg-{i:05d}", {"v": "0"})) for i in range(workloads)])
        create_all(api, [(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", deployment(i))
                         for i in range(workloads)])
        config = load_config(
            [f"--git-config={config_path}", f"--git-cache-dir={tmp / 'controller-cache'}",
             f"--coalesce-window={WINDOW_S}s", "--log-level=warning"],
            environ={"HOME": str(tmp), "POD_NAMESPACE": NAMESPACE})
        app = App(config, api_client=api_for(kubeconfig).api_client, serve_http=False)
        sink = build_git_sink(config, app.api, app.metrics, app.recorder)
        assert sink is not None
        app.controller.sinks["git"] = sink
        # Steady state: the clone, index and digest key exist before the changes.
        handle = sink.repository(REPO)
        with handle.lock:
            handle.sync()
        sink.digest_key()
        app.start()
        try:
            before = len(host.log(REPO))
            change_all(api, workloads)
            changed_at = time.perf_counter()
            while len(host.log(REPO)) == before:
                if time.perf_counter() - changed_at > 300:
                    raise RuntimeError("no commit within 300 s")
                time.sleep(0.02)
            wall = time.perf_counter() - changed_at
            time.sleep(WINDOW_S + 2)  # anything left over would be a second commit
            while not app.controller.idle():
                time.sleep(0.05)
            log = host.log(REPO)
            commits = len(log) - before
            emit_s = app.registry.get_sample_value(
                "gitops_reloader_emit_duration_seconds_sum", {"sink": "git"}) or 0.0
            marker = b"gitops-reloader.io/config-hash"
            edited = sum(1 for i in range(workloads)
                         if marker in (host.read_file(REPO, manifest_path(i)) or b""))
        finally:
            app.stop()
    return {"batch_commit_push_s": emit_s, "change_to_commit_s": wall, "commits_for_batch": commits,
            "edited": edited}


def deployment(i: int) -> dict[str, Any]:
    name = f"svc-{i:05d}"
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {
            "gitops-reloader.io/sink": "git", "configmap.reloader.stakater.com/reload": f"cfg-{i:05d}"}},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
    }


def change_all(api: KubeApi, workloads: int) -> None:
    def change(i: int) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/cfg-{i:05d}"
        api.request("PATCH", path, body={"data": {"v": "1"}},
                    content_type="application/merge-patch+json")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(change, range(workloads)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 files and 50 workloads")
    args = parser.parse_args()
    files, workloads = (1000, 50) if args.quick else (5000, 200)
    with tempfile.TemporaryDirectory(prefix="bench-git-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["HOME"] = str(tmp)  # no developer git config in the measurements
        os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
        with GitHostServer(tmp / "srv", token=TOKEN) as host:
            started = time.perf_counter()
            url = seed_repository(host, tmp, files)
            seed_s = time.perf_counter() - started
            config_path = write_git_config(tmp, url)
            index = measure_index(config_path, tmp, host)
            batch = measure_batch(config_path, tmp, host, workloads)
    rows = [
        ("manifest files (documents)", f"{files:,} ({index['documents']:,})"),
        ("generate + seed repository", f"{seed_s:.2f} s"),
        ("clone over HTTP", f"{index['clone_s']:.2f} s"),
        ("index, cold (files read)", f"{index['index_cold_s']:.2f} s ({index['cold_files']:,})"),
        ("fetch of a 10-file commit", f"{index['fetch_s']:.3f} s"),
        ("index, incremental (files read)",
         f"{index['index_incremental_s'] * 1000:.1f} ms ({index['incremental_files']})"),
        ("workloads changed in one window", f"{workloads}"),
        ("emit_batch: sync+edit+commit+push", f"{batch['batch_commit_push_s']:.2f} s"),
        ("last change -> pushed commit", f"{batch['change_to_commit_s']:.2f} s (window {WINDOW_S:.0f} s)"),
        ("commits for the batch", f"{batch['commits_for_batch']}"),
        ("manifests edited", f"{batch['edited']}/{workloads}"),
    ]
    print_table("git sink", rows, "python bench/git_sink.py" + (" --quick" if args.quick else ""))
    print(json.dumps({
        "index_cold_s": round(index["index_cold_s"], 3),
        "index_incremental_s": round(index["index_incremental_s"], 4),
        "batch_commit_push_s": round(batch["batch_commit_push_s"], 3),
        "commits_for_batch": batch["commits_for_batch"],
    }))


if __name__ == "__main__":
    main()
