"""A schema of the KubeRay RayJob fields that infra/kuberay/'s manifests use, and the rules it cannot express
(tests/jobs/commands/test_infra_manifests.py). Field names and types are KubeRay's (ray-operator/apis/ray/v1: rayjob_types.go,
raycluster_types.go) and those of the Kubernetes core types they embed (PodTemplateSpec, Container, Volume, ...)."""
from __future__ import annotations

import re

import yaml

# Every object is closed: a field not listed here is an error, so that a typo (`shutdownAfterJobFinish`) fails here
# instead of being dropped by the API server. Add a field here when a manifest starts to use it.


def closed(required=(), **properties) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def array(items: dict, min_items: int = 0) -> dict:
    return {"type": "array", "items": items, "minItems": min_items}


STR, BOOL = {"type": "string"}, {"type": "boolean"}
INT32 = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
STR_MAP = {"type": "object", "additionalProperties": STR}  # rayStartParams, labels: map[string]string
DNS1123_LABEL = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
# KubeRay names the job's RayCluster after the RayJob plus 6 characters, and a RayCluster name is a DNS-1035 label
# of at most 53: so a RayJob name is at most 47, and a generateName prefix 42 (Kubernetes adds 5).
RAYJOB_NAME = {"type": "string", "pattern": r"^[a-z]([-a-z0-9]*[a-z0-9])?$", "maxLength": 47}
RAYJOB_GENERATE_NAME = {"type": "string", "pattern": r"^[a-z][-a-z0-9]*-$", "maxLength": 42}
QUANTITY = {"anyOf": [{"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$"},
                      {"type": "integer", "minimum": 0}]}
RESOURCES = closed(requests={"type": "object", "additionalProperties": QUANTITY},
                   limits={"type": "object", "additionalProperties": QUANTITY})
ENV_VAR = closed(["name"], name=STR, value=STR, valueFrom=closed(
    secretKeyRef=closed(["name", "key"], name=STR, key=STR, optional=BOOL)))
CONTAINER = closed(
    ["name", "image"], name=DNS1123_LABEL, image={"type": "string", "minLength": 1},
    ports=array(closed(["containerPort"], containerPort={"type": "integer", "minimum": 1, "maximum": 65535},
                       name=DNS1123_LABEL)),
    env=array(ENV_VAR), resources=RESOURCES,
    volumeMounts=array(closed(["name", "mountPath"], name=DNS1123_LABEL, mountPath=STR, readOnly=BOOL)))
VOLUME = closed(["name"], name=DNS1123_LABEL,
                emptyDir=closed(medium={"enum": ["", "Memory"]}, sizeLimit=QUANTITY),
                persistentVolumeClaim=closed(["claimName"], claimName=DNS1123_LABEL, readOnly=BOOL))
TOLERATION = closed(key=STR, operator={"enum": ["Exists", "Equal"]}, value=STR,
                    effect={"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]})
POD_TEMPLATE = closed(["spec"], metadata=closed(labels=STR_MAP, annotations=STR_MAP), spec=closed(
    ["containers"], serviceAccountName=DNS1123_LABEL, nodeSelector=STR_MAP, tolerations=array(TOLERATION),
    containers=array(CONTAINER, min_items=1), volumes=array(VOLUME)))
RAY_CLUSTER_SPEC = closed(
    ["headGroupSpec"],
    rayVersion={"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+$"},
    enableInTreeAutoscaling=BOOL,
    autoscalerOptions=closed(upscalingMode={"enum": ["Default", "Aggressive", "Conservative"]},
                             idleTimeoutSeconds=INT32, resources=RESOURCES, env=array(ENV_VAR)),
    headGroupSpec=closed(["rayStartParams", "template"], rayStartParams=STR_MAP, template=POD_TEMPLATE,
                         serviceType={"enum": ["ClusterIP", "NodePort", "LoadBalancer"]}),
    workerGroupSpecs=array(closed(
        ["groupName", "minReplicas", "maxReplicas", "rayStartParams", "template"], groupName=DNS1123_LABEL,
        replicas=INT32, minReplicas=INT32, maxReplicas=INT32, numOfHosts={"type": "integer", "minimum": 1},
        rayStartParams=STR_MAP, template=POD_TEMPLATE)))
RAYJOB_SCHEMA = closed(
    ["apiVersion", "kind", "metadata", "spec"], apiVersion={"const": "ray.io/v1"}, kind={"const": "RayJob"},
    metadata={**closed(["labels"], name=RAYJOB_NAME, generateName=RAYJOB_GENERATE_NAME, namespace=DNS1123_LABEL,
                       labels=STR_MAP, annotations=STR_MAP),
              "oneOf": [{"required": ["name"]}, {"required": ["generateName"]}]},
    spec=closed(
        ["entrypoint", "rayClusterSpec"], entrypoint={"type": "string", "minLength": 1}, runtimeEnvYAML=STR,
        submissionMode={"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode"]}, shutdownAfterJobFinishes=BOOL,
        ttlSecondsAfterFinished=INT32, activeDeadlineSeconds={**INT32, "minimum": 1}, backoffLimit=INT32,
        suspend=BOOL, rayClusterSpec=RAY_CLUSTER_SPEC))


def quantity(value) -> float:
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    number, unit = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(value)).groups()
    return float(number) * units.get(unit, 1)


def rayjob_problems(job: dict) -> list[str]:
    """The RayJob schema, then what it cannot say: rules of KubeRay's validation and of Kubernetes."""
    import jsonschema
    from ray.runtime_env import RuntimeEnv

    validator = jsonschema.Draft202012Validator(RAYJOB_SCHEMA)
    problems = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(job)]
    if problems:
        return problems
    spec, cluster = job["spec"], job["spec"]["rayClusterSpec"]
    try:  # KubeRay only checks that it is YAML; Ray checks the rest when the job starts, too late
        RuntimeEnv(**yaml.safe_load(spec.get("runtimeEnvYAML") or "{}"))
    except (TypeError, ValueError) as exc:
        problems.append(f"runtimeEnvYAML: {exc}")
    if spec.get("ttlSecondsAfterFinished", 0) > 0 and not spec.get("shutdownAfterJobFinishes"):
        problems.append("ttlSecondsAfterFinished needs shutdownAfterJobFinishes")
    groups = cluster.get("workerGroupSpecs", [])
    if len({g["groupName"] for g in groups}) != len(groups):
        problems.append("worker group names repeat")
    for g in groups:
        if not g["minReplicas"] <= g.get("replicas", g["minReplicas"]) <= g["maxReplicas"]:
            problems.append(f"{g['groupName']}: needs minReplicas <= replicas <= maxReplicas")
    elastic = any(g["minReplicas"] < g["maxReplicas"] for g in groups)
    if elastic != bool(cluster.get("enableInTreeAutoscaling")):  # else min/max mean nothing, or nothing scales
        problems.append("enableInTreeAutoscaling must be on exactly when a worker group can change size")
    pods = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in groups]
    for pod in pods:
        volumes = {v["name"] for v in pod["spec"].get("volumes", [])}
        for c in pod["spec"]["containers"]:
            problems += [f"{c['name']}: mounts {m['name']}, no volume of its pod"
                         for m in c.get("volumeMounts", []) if m["name"] not in volumes]
            requests, limits = c["resources"].get("requests", {}), c["resources"].get("limits", {})
            for key in set(requests) & set(limits):
                if quantity(requests[key]) > quantity(limits[key]):
                    problems.append(f"{c['name']}: {key} request above its limit")
            if "nvidia.com/gpu" in requests and requests["nvidia.com/gpu"] != limits.get("nvidia.com/gpu"):
                problems.append(f"{c['name']}: a GPU request must equal its limit")  # extended resources
    return problems
