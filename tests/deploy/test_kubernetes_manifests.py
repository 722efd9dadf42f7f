"""The Kubernetes manifests of deploy/kubernetes (docs/kubernetes.md) are what the API server and KubeRay accept, and
they fit together: every core/apps object is checked field by field against the `kubernetes` client's API models
(required fields, unknown fields, value types), the RayCluster against a schema of KubeRay's `ray.io/v1` RayCluster
fields, the master's command is a `det master up` our CLI accepts with the ConfigMap's config, and every name one
object gives another (Secret keys, ConfigMaps, claims, Services, the Ray head's address, pools' custom resources)
exists."""
import argparse
import json
import pathlib
import re
from typing import Any, Dict, Iterator, List, Mapping, Tuple

import pytest
import yaml
from kubernetes import client as k8s

from determined.cli import main as cli_main
from determined.cli import master as cli_master

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "kubernetes"
DOC = REPO / "docs" / "kubernetes.md"

# ---------------------------------------------------------------- the Kubernetes API models

_PRIMITIVES = {"str": str, "int": int, "float": (int, float), "bool": bool}


def _model(type_name: str) -> Any:
    return getattr(k8s.models, type_name)


def check_model(value: Any, type_name: str, where: str) -> List[str]:
    """The problems of `value` (parsed YAML) as the API type `type_name` of the client ("V1Deployment",
    "list[V1Container]", "dict(str, str)", "str", "object"...): unknown fields, missing required fields, wrong types."""
    if type_name == "object":  # IntOrString and free-form fields
        return []
    if type_name.lower().startswith("list["):  # "List[V1Container]" (older clients: "list[V1Container]")
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {type(value).__name__}"]
        return [p for i, v in enumerate(value) for p in check_model(v, type_name[5:-1], f"{where}[{i}]")]
    if type_name.lower().startswith("dict"):  # "Dict[str, str]" (older clients: "dict(str, str)")
        if not isinstance(value, dict):
            return [f"{where}: expected a mapping, got {type(value).__name__}"]
        inner = type_name[type_name.index(",") + 1:-1].strip()
        return [p for k, v in value.items() for p in check_model(v, inner, f"{where}.{k}")]
    if type_name in _PRIMITIVES:
        expected = _PRIMITIVES[type_name]
        if isinstance(value, bool) and type_name != "bool" or not isinstance(value, expected):
            return [f"{where}: expected {type_name}, got {value!r}"]
        return []
    if type_name in ("datetime", "bytes"):
        return []
    model = _model(type_name)
    if not isinstance(value, dict):
        return [f"{where}: expected a mapping ({type_name}), got {type(value).__name__}"]
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    problems = [f"{where}.{key}: unknown field of {type_name}" for key in value if key not in by_json]
    for key, v in value.items():
        if key in by_json and v is not None:
            problems += check_model(v, model.openapi_types[by_json[key]], f"{where}.{key}")
    if problems:  # the deepest problem is named once, not again by every model above it
        return problems
    # Required fields (and enumerations): the model's constructor refuses a missing one (a client of release 31
    # or older checks client-side for None; later ones are pydantic models that validate what they are given).
    given = {attr: value[json_name] for attr, json_name in model.attribute_map.items() if json_name in value}
    try:
        model(**{attr: given.get(attr) for attr in model.attribute_map} if not hasattr(model, "model_validate")
              else given)
    except ValueError as e:  # pydantic's ValidationError is a ValueError
        problems.append(f"{where}: {str(e).splitlines()[0]}: {'; '.join(str(e).splitlines()[1:3])}")
    return problems


# The kinds of the manifests, as the client's models name them.
KINDS = {("v1", "Namespace"): "V1Namespace", ("v1", "Service"): "V1Service", ("v1", "ConfigMap"): "V1ConfigMap",
         ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim", ("apps/v1", "Deployment"): "V1Deployment",
         ("apps/v1", "StatefulSet"): "V1StatefulSet", ("v1", "Secret"): "V1Secret"}

# ---------------------------------------------------------------- KubeRay's RayCluster (ray.io/v1)

# The fields of KubeRay's RayCluster spec (ray-operator/apis/ray/v1/raycluster_types.go; KubeRay's API reference):
# field -> (type, required). A type is a primitive, "pod" (a core PodTemplateSpec), a nested schema, or
# ("list", schema).
_STR_MAP = "Dict[str, str]"
WORKER_GROUP = {
    "groupName": ("str", True), "replicas": ("int", False), "minReplicas": ("int", False),
    "maxReplicas": ("int", False), "numOfHosts": ("int", False), "rayStartParams": (_STR_MAP, False),
    "template": ("pod", True), "scaleStrategy": ({"workersToDelete": ("List[str]", False)}, False),
    "suspend": ("bool", False), "idleTimeoutSeconds": ("int", False),
}
HEAD_GROUP = {
    "serviceType": ("str", False), "headService": ("V1Service", False), "enableIngress": ("bool", False),
    "rayStartParams": (_STR_MAP, False), "template": ("pod", True),
}
RAYCLUSTER_SPEC = {
    "headGroupSpec": (HEAD_GROUP, True), "workerGroupSpecs": (("list", WORKER_GROUP), False),
    "rayVersion": ("str", False), "enableInTreeAutoscaling": ("bool", False), "autoscalerOptions": ("object", False),
    "headServiceAnnotations": (_STR_MAP, False), "suspend": ("bool", False),
    "gcsFaultToleranceOptions": ("object", False), "managedBy": ("str", False),
    "authOptions": ({"mode": ("str", False)}, False),
}
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


def check_schema(value: Any, schema: Mapping[str, Tuple[Any, bool]], where: str) -> List[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected a mapping, got {type(value).__name__}"]
    problems = [f"{where}.{key}: unknown field (KubeRay's fields here: {', '.join(schema)})"
                for key in value if key not in schema]
    for key, (kind, required) in schema.items():
        if key not in value or value[key] is None:
            if required:
                problems.append(f"{where}.{key}: required by KubeRay")
            continue
        v, at = value[key], f"{where}.{key}"
        if kind == "pod":
            problems += check_model(v, "V1PodTemplateSpec", at)
        elif isinstance(kind, dict):
            problems += check_schema(v, kind, at)
        elif isinstance(kind, tuple):
            problems += ([f"{at}: expected a list"] if not isinstance(v, list) else
                         [p for i, item in enumerate(v) for p in check_schema(item, kind[1], f"{at}[{i}]")])
        else:
            problems += check_model(v, kind, at)
    return problems


def check_raycluster(doc: Dict[str, Any]) -> List[str]:
    problems = [f"RayCluster.{k}: unknown top-level field" for k in doc if k not in ("apiVersion", "kind", "metadata", "spec")]
    problems += check_model(doc.get("metadata") or {}, "V1ObjectMeta", "RayCluster.metadata")
    spec = doc.get("spec")
    problems += check_schema(spec, RAYCLUSTER_SPEC, "RayCluster.spec")
    if not isinstance(spec, dict):
        return problems
    head = spec.get("headGroupSpec") or {}
    if head.get("serviceType") not in (None,) + SERVICE_TYPES:
        problems.append(f"RayCluster.spec.headGroupSpec.serviceType: {head['serviceType']!r} is not one of {SERVICE_TYPES}")
    if ((spec.get("authOptions") or {}).get("mode")) not in (None, "disabled", "token"):
        problems.append("RayCluster.spec.authOptions.mode: expected disabled or token")
    names = [g.get("groupName") for g in spec.get("workerGroupSpecs") or []]
    if len(set(names)) != len(names):
        problems.append(f"RayCluster.spec.workerGroupSpecs: group names {names} repeat")
    for group in spec.get("workerGroupSpecs") or []:
        low, n, high = group.get("minReplicas", 0), group.get("replicas", 0), group.get("maxReplicas", 2**31 - 1)
        if not low <= n <= high:
            problems.append(f"RayCluster worker group {group.get('groupName')}: replicas {n} not within "
                            f"minReplicas {low} and maxReplicas {high}")
    return problems


# ---------------------------------------------------------------- loading


def manifests() -> Iterator[Tuple[str, Dict[str, Any]]]:
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                yield path.name, doc


@pytest.fixture(scope="module")
def objects() -> List[Tuple[str, Dict[str, Any]]]:
    return list(manifests())


def of_kind(objects: List[Tuple[str, Dict[str, Any]]], kind: str) -> List[Dict[str, Any]]:
    return [doc for _, doc in objects if doc.get("kind") == kind]


def containers(objects: List[Tuple[str, Dict[str, Any]]]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """Every container of every pod template (Deployments, StatefulSets, the RayCluster's groups)."""
    for _, doc in objects:
        spec = doc.get("spec") or {}
        templates = []
        if doc["kind"] in ("Deployment", "StatefulSet"):
            templates.append((doc["metadata"]["name"], spec["template"]))
        if doc["kind"] == "RayCluster":
            templates.append(("head", spec["headGroupSpec"]["template"]))
            templates += [(g["groupName"], g["template"]) for g in spec.get("workerGroupSpecs") or []]
        for owner, template in templates:
            for c in template["spec"].get("containers") or []:
                yield owner, c


# ---------------------------------------------------------------- the tests


def test_every_core_and_apps_object_matches_the_kubernetes_api_models(objects: List[Tuple[str, Dict[str, Any]]]) -> None:
    seen = set()
    for name, doc in objects:
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key == ("ray.io/v1", "RayCluster"):
            continue
        assert key in KINDS, f"{name}: {key} is neither a core/apps kind this test knows nor a RayCluster"
        problems = check_model(doc, KINDS[key], f"{name}:{doc['kind']}/{doc.get('metadata', {}).get('name')}")
        assert problems == [], problems
        # And the client's own deserializer builds the model from it, as from an API server's answer (its public
        # `deserialize` takes a response object or text, depending on the client's release).
        obj = k8s.ApiClient()._ApiClient__deserialize(doc, KINDS[key])
        assert obj.metadata.name == doc["metadata"]["name"]
        seen.add(doc["kind"])
    assert {"Namespace", "Service", "StatefulSet", "Deployment", "ConfigMap", "PersistentVolumeClaim"} <= seen


def test_the_checks_catch_what_the_api_server_would_refuse() -> None:
    """The model check finds an unknown field, a missing required field and a wrong type (so the test above can
    fail), and the RayCluster schema an unknown field and a non-string rayStartParams value."""
    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "replica": 1,
                    "template": {"spec": {"containers": [
                        {"image": "i"}, {"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}}}}
    problems = "\n".join(check_model(bad, "V1Deployment", "bad"))
    assert "bad.spec.replica: unknown field of V1DeploymentSpec" in problems
    missing = [p for p in problems.splitlines() if p.startswith("bad.spec.template.spec.containers[0]: ")]
    assert missing and "name" in missing[0], problems  # a container needs a name
    assert "containers[1].ports[0].containerPort: expected int, got '80'" in problems
    ray_bad = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
               "spec": {"headGroupSpec": {"rayStartParams": {"num-cpus": 0}, "template": {"spec": {"containers": []}}},
                        "workerGroupSpecs": [{"groupName": "g", "replica": 2, "template": {"spec": {"containers": []}}}]}}
    problems = "\n".join(check_raycluster(ray_bad))
    assert "rayStartParams.num-cpus: expected str, got 0" in problems
    assert "workerGroupSpecs[0].replica: unknown field" in problems


def test_the_raycluster_matches_kuberays_fields_with_a_gpu_and_a_cpu_group(objects: List[Tuple[str, Dict[str, Any]]]) -> None:
    clusters = of_kind(objects, "RayCluster")
    assert len(clusters) == 1 and clusters[0]["apiVersion"] == "ray.io/v1"
    cluster = clusters[0]
    assert check_raycluster(cluster) == []
    groups = {g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]}
    assert set(groups) == {"gpu", "cpu"}
    gpu_limits = groups["gpu"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert gpu_limits.get("nvidia.com/gpu") == "1"
    assert "nvidia.com/gpu" not in groups["cpu"]["template"]["spec"]["containers"][0]["resources"].get("limits", {})


def _master_deployment(objects: List[Tuple[str, Dict[str, Any]]]) -> Dict[str, Any]:
    (deployment,) = [d for d in of_kind(objects, "Deployment") if d["metadata"]["name"] == "determined-master"]
    return deployment


def _master_configs(objects: List[Tuple[str, Dict[str, Any]]]) -> Dict[str, str]:
    (config_map,) = [c for c in of_kind(objects, "ConfigMap") if c["metadata"]["name"] == "determined-master-config"]
    return dict(config_map["data"])


def test_the_master_runs_a_det_master_up_our_cli_accepts_with_each_config(
        objects: List[Tuple[str, Dict[str, Any]]], tmp_path: pathlib.Path) -> None:
    deployment = _master_deployment(objects)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = list(container["command"]) + list(container.get("args") or [])
    assert command[:3] == ["det", "master", "up"]
    args = cli_main._parser().parse_args(command[1:])
    assert args.func is cli_master.up
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    config_dir = str(pathlib.PurePosixPath(args.config).parent)
    assert volumes[mounts[config_dir]]["configMap"]["name"] == "determined-master-config"
    configs = _master_configs(objects)
    assert pathlib.PurePosixPath(args.config).name in configs
    for key, text in configs.items():  # the config the command names, and the CPU variant the doc offers
        path = tmp_path / key
        path.write_text(text)
        settings = cli_master._settings(argparse.Namespace(**{**vars(args), "config": str(path)}))
        assert settings["resource_manager"] == "ray", key
        assert settings["host"] == "0.0.0.0", f"{key}: trials on the Ray pods must reach the master"
        assert mounts.get(settings["data_dir"]) == "data", f"{key}: the data dir is the claim's"
        assert settings["pools"].default_compute in settings["pools"].pools
        assert all(pool.ray is not None for pool in settings["pools"].pools.values()), key


def test_names_between_the_objects_resolve(objects: List[Tuple[str, Dict[str, Any]]]) -> None:
    namespace = of_kind(objects, "Namespace")[0]["metadata"]["name"]
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["namespace"] == namespace
    assert sorted(kustomization["resources"]) == sorted(p.name for p in DEPLOY.glob("*.yaml")
                                                         if p.name != "kustomization.yaml")
    (generator,) = kustomization["secretGenerator"]
    assert kustomization["generatorOptions"]["disableNameSuffixHash"] is True  # the RayCluster names it exactly
    # Every Secret key a container reads is one the documented command writes into secrets.env.
    secret_lines = [line for line in (DEPLOY / "kustomization.yaml").read_text().splitlines() + DOC.read_text().splitlines()
                    if "secrets.env" in line and "printf" in line]
    assert secret_lines, "the command that writes secrets.env is in kustomization.yaml and docs/kubernetes.md"
    keys = set()
    for owner, c in containers(objects):
        for env in c.get("env") or []:
            ref = ((env.get("valueFrom") or {}).get("secretKeyRef"))
            if ref:
                assert ref["name"] == generator["name"], f"{owner}: Secret {ref['name']} is not generated"
                keys.add(ref["key"])
    assert keys == {"db-password", "ray-auth-token"}
    for line in secret_lines:
        assert all(f"{key}=" in line for key in keys), line
    # ConfigMaps, claims and Services.
    config_maps = {c["metadata"]["name"] for c in of_kind(objects, "ConfigMap")}
    claims = {c["metadata"]["name"] for c in of_kind(objects, "PersistentVolumeClaim")}
    for workload in of_kind(objects, "Deployment") + of_kind(objects, "StatefulSet"):
        for volume in workload["spec"]["template"]["spec"].get("volumes") or []:
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims
    pod_labels = [w["spec"]["template"]["metadata"]["labels"]
                  for w in of_kind(objects, "Deployment") + of_kind(objects, "StatefulSet")]
    services = {s["metadata"]["name"]: s for s in of_kind(objects, "Service")}
    for name, service in services.items():
        selector = service["spec"]["selector"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), f"Service {name} selects no pod"
    for statefulset in of_kind(objects, "StatefulSet"):
        assert statefulset["spec"]["serviceName"] in services


def test_the_master_reaches_the_database_and_the_ray_head_and_its_pools_have_nodes(
        objects: List[Tuple[str, Dict[str, Any]]]) -> None:
    namespace = of_kind(objects, "Namespace")[0]["metadata"]["name"]
    container = _master_deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    url = env["DET_DB_URL"]["value"]
    # $(DB_PASSWORD) is expanded by Kubernetes only from a variable defined before it.
    names = [e["name"] for e in container["env"]]
    assert "$(DB_PASSWORD)" in url and names.index("DB_PASSWORD") < names.index("DET_DB_URL")
    host = re.match(r"postgresql://determined:\$\(DB_PASSWORD\)@([^:/]+):5432/determined$", url)
    assert host, url
    assert host.group(1) == f"postgres.{namespace}.svc.cluster.local"
    postgres = {e["name"]: e.get("value") for e in
                of_kind(objects, "StatefulSet")[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert postgres["POSTGRES_USER"] == "determined" and postgres["POSTGRES_DB"] == "determined"
    cluster = of_kind(objects, "RayCluster")[0]
    head_address = f"{cluster['metadata']['name']}-head-svc.{namespace}.svc.cluster.local:6379"  # KubeRay's name
    # Ray's token: the same Secret key on the master and every Ray pod.
    for owner, c in list(containers(objects)):
        if owner == "postgres":
            continue
        c_env = {e["name"]: e for e in c.get("env") or []}
        assert c_env["RAY_AUTH_MODE"]["value"] == "token", owner
        assert c_env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "ray-auth-token", owner
    groups = cluster["spec"]["workerGroupSpecs"]
    offered = {g["groupName"]: json.loads(json.loads(g["rayStartParams"]["resources"])) for g in groups}
    for key, text in _master_configs(objects).items():
        config = yaml.safe_load(text)
        assert config["ray_address"] == head_address, key
        assert "determined-master" in config["allowed_hosts"], key
        for pool in config["resource_pools"]:
            wanted = pool["ray"]["resources"]
            matching = [g for g, res in offered.items() if all(res.get(n, 0) >= a for n, a in wanted.items())]
            assert matching, f"{key}: pool {pool['pool_name']} needs {wanted}; no worker group offers it"
