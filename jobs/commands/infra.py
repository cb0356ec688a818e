"""`tidemark infra render`: the KubeRay RayJob of every command that runs work, from one definition.

infra/kuberay/base.yaml holds what the jobs share (images, Ray version, head and worker groups, service account,
RayJob lifecycle fields) and a table of jobs (command, arguments, cluster, worker group size); the runtime env is
infra/runtime_env.yaml's, the same one `ray job submit` uses. Rendering is pure: `render()` returns manifests as
dicts, and only the command writes YAML. The committed infra/kuberay/rayjob-*.yaml and cronjob-*-template.yaml are
this command's output, and a test checks that they still are.
"""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import List, Optional

import typer
import yaml

INFRA = Path(__file__).resolve().parents[2] / "infra"
BASE = INFRA / "kuberay" / "base.yaml"
RUNTIME_ENV = INFRA / "runtime_env.yaml"
RENDER_TO = "infra/kuberay"
JOB_KEYS = {"about", "command", "cluster", "dataVolume", "workers", "spec", "env_vars", "args"}
WORKER_KEYS = {"replicas", "minReplicas", "maxReplicas"}


def load_definition(base: Path = BASE, runtime_env: Path = RUNTIME_ENV) -> dict:
    """base.yaml with infra/runtime_env.yaml under `runtimeEnv`: everything render() reads, as plain data."""
    definition = yaml.safe_load(base.read_text())
    definition["runtimeEnv"] = yaml.safe_load(runtime_env.read_text())
    return definition


def job_names(definition: dict) -> list[str]:
    return [*definition["jobs"], *definition.get("scheduled", {})]


def render(definition: dict, names: Optional[List[str]] = None, images: Optional[dict] = None,
           namespace: Optional[str] = None, sets: tuple[tuple[str, object], ...] = ()) -> dict[str, dict]:
    """{file name: {"about": text, "docs": [manifest dict, ...]}} for the named jobs (default: all of them).
    `images` replaces entries of definition["images"]; `sets` are (dotted path, value) pairs applied to each
    RayJob after rendering (the paths are the ones seen in the rendered YAML)."""
    definition = dict(definition, images={**definition["images"], **(images or {})})
    wanted = names or job_names(definition)
    unknown = sorted(set(wanted) - set(job_names(definition)))
    if unknown:
        raise ValueError(f"no job named {', '.join(unknown)} in {BASE.name} (jobs: {', '.join(job_names(definition))})")
    files = {}
    for name in wanted:
        scheduled = name not in definition["jobs"]
        job = (definition["scheduled"] if scheduled else definition["jobs"])[name]
        rayjob = rayjob_manifest(definition, name, job, generate_name=scheduled)
        if namespace:
            rayjob["metadata"]["namespace"] = namespace
        for path, value in sets:
            set_path(rayjob, path, value)
        if scheduled:
            files[f"cronjob-{name}-template.yaml"] = {"about": job["about"], "docs": [
                template_configmap(name, rayjob, namespace)]}
        else:
            files[f"rayjob-{name}.yaml"] = {"about": job["about"], "docs": [rayjob]}
    return files


def rayjob_manifest(definition: dict, name: str, job: dict, generate_name: bool = False) -> dict:
    """One RayJob. A scheduled job gets metadata.generateName: its CronJob creates a new RayJob every run."""
    unknown = set(job) - JOB_KEYS
    if unknown:  # a typo in base.yaml must not be dropped silently
        raise ValueError(f"job {name}: unknown keys {sorted(unknown)} (known: {sorted(JOB_KEYS)})")
    cluster = definition["clusters"][job["cluster"]]
    workers = job.get("workers")
    if bool(workers) != ("workers" in cluster):
        raise ValueError(f"job {name}: `workers:` goes with a cluster that has a worker group ({job['cluster']} "
                         f"{'has' if 'workers' in cluster else 'has none'})")
    if workers and set(workers) != WORKER_KEYS:
        raise ValueError(f"job {name}: workers needs exactly {sorted(WORKER_KEYS)}")
    image = definition["images"][cluster["image"]]
    data = definition["dataVolume"] if job.get("dataVolume") else None
    head = definition["head"]

    cluster_spec: dict = {"rayVersion": definition["rayVersion"]}
    if workers and workers["minReplicas"] < workers["maxReplicas"]:  # elastic: the Ray autoscaler sizes the group
        cluster_spec["enableInTreeAutoscaling"] = True
        cluster_spec["autoscalerOptions"] = definition["autoscalerOptions"]
    cluster_spec["headGroupSpec"] = {
        "rayStartParams": {**head["rayStartParams"], **cluster["head"]["rayStartParams"]},
        "template": pod_template(definition, "ray-head", image, cluster["head"], data, ports=head["ports"])}
    if workers:
        group = cluster["workers"]
        cluster_spec["workerGroupSpecs"] = [{
            "groupName": group["groupName"], **{k: workers[k] for k in ("replicas", "minReplicas", "maxReplicas")},
            "rayStartParams": group["rayStartParams"],
            "template": pod_template(definition, "ray-worker", image, group, data)}]

    metadata = {"generateName": f"tidemark-{name}-"} if generate_name else {"name": f"tidemark-{name}"}
    metadata["labels"] = {"app.kubernetes.io/name": "tidemark", "app.kubernetes.io/component": name}
    spec = {"entrypoint": f"tidemark {job.get('command', name)} {job['args'].strip()}",
            "runtimeEnvYAML": runtime_env_yaml(definition["runtimeEnv"], job.get("env_vars")),
            **definition["spec"], **job.get("spec", {}), "rayClusterSpec": cluster_spec}
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": spec}
    # Pods share pieces of the definition (env, mounts); a JSON round trip unshares them (deepcopy would keep the
    # sharing), so that a --set on one pod changes no other, nor the definition.
    return json.loads(json.dumps(rayjob))


def pod_template(definition: dict, container_name: str, image: str, group: dict, data: Optional[dict],
                 ports: Optional[list] = None) -> dict:
    shared = definition["container"]
    container = {"name": container_name, "image": image, **({"ports": ports} if ports else {}),
                 "env": shared["env"], "resources": group["resources"],
                 "volumeMounts": shared["volumeMounts"] + (
                     [{"name": data["name"], "mountPath": data["mountPath"]}] if data else [])}
    volumes = definition["volumes"] + (
        [{"name": data["name"], "persistentVolumeClaim": {"claimName": data["claimName"]}}] if data else [])
    pod = {"serviceAccountName": definition["serviceAccountName"],
           **{k: group[k] for k in ("nodeSelector", "tolerations") if k in group},
           "containers": [container], "volumes": volumes}
    return {"spec": pod}


def runtime_env_yaml(runtime_env: dict, env_vars: Optional[dict] = None) -> str:
    # `excludes` filter an uploaded working dir; a RayJob uploads none (it runs the image's installed Tidemark).
    env = {k: v for k, v in runtime_env.items() if k != "excludes"}
    if env_vars:
        env["env_vars"] = {**env.get("env_vars", {}), **env_vars}
    # Quoted, so that a value stays a string after substitution (the CronJob puts a date in __RUN_DATE__).
    env["env_vars"] = {k: _Quoted(v) for k, v in env.get("env_vars", {}).items()}
    return yaml.dump(env, Dumper=_Dumper, sort_keys=False)


def template_configmap(name: str, rayjob: dict, namespace: Optional[str]) -> dict:
    """The ConfigMap a CronJob creates its RayJob from (`kubectl create -f /templates/rayjob.yaml`)."""
    metadata = {"name": f"tidemark-{name}-template", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {"rayjob.yaml": dump_yaml([rayjob])}}


def set_path(doc, path: str, value) -> None:
    """doc[a][b][0][c] = value for path `a.b.0.c`; `\\.` is a literal dot (`limits.nvidia\\.com/gpu`). Missing
    mapping keys are created; a list index must exist."""
    keys = [k.replace("\\.", ".") for k in re.split(r"(?<!\\)\.", path)]
    node = doc
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise ValueError(f"--set {path}: {key!r} is not an index of a list of {len(node)}")
            key = int(key)
        elif not isinstance(node, dict):
            raise ValueError(f"--set {path}: {'.'.join(keys[:i])} is a value, not a mapping or a list")
        elif not last and key not in node:
            node[key] = {}
        if last:
            node[key] = value
        else:
            node = node[key]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (runtimeEnvYAML, the ConfigMap's RayJob) as `|` blocks; no anchors or aliases."""

    def ignore_aliases(self, data):
        return True


class _Quoted(str):
    """A string always written in double quotes."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))
_Dumper.add_representer(_Quoted, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style='"'))


def dump_yaml(docs: list[dict]) -> str:
    return "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=4096) for d in docs)


def manifest_text(file_name: str, rendered: dict) -> str:
    """A rendered file: the generated-by header, what the job does, how to submit it, then the documents."""
    lines = ["# generated by `tidemark infra render`; edit infra/kuberay/base.yaml instead, then run",
             f"# `tidemark infra render --out {RENDER_TO}`.", "#"]
    lines += ["# " + line for line in textwrap.wrap(rendered["about"], 110)]
    if file_name.startswith("rayjob-"):
        lines += [f"#   kubectl apply -f {RENDER_TO}/serviceaccount.yaml -f {RENDER_TO}/{file_name}",
                  "# A RayJob runs once: `kubectl delete -f` it before applying it again."]
    return "\n".join(lines) + "\n" + dump_yaml(rendered["docs"])


def _parse_images(specs: List[str], kinds) -> dict:
    """`REF` for every image, `KIND=REF` for one kind (gpu, cpu)."""
    images = {}
    for spec in specs:
        kind, sep, ref = spec.partition("=")
        if not sep:
            images.update({k: spec for k in kinds})
        elif kind in kinds and ref:
            images[kind] = ref
        else:
            raise typer.BadParameter(f"--image {spec}: give REF or KIND=REF with KIND one of {', '.join(kinds)}")
    return images


def _parse_sets(specs: List[str]) -> tuple:
    pairs = []
    for spec in specs:
        path, sep, raw = spec.partition("=")
        if not sep or not path:
            raise typer.BadParameter(f"--set {spec}: expected PATH=VALUE, e.g. spec.backoffLimit=4")
        pairs.append((path, yaml.safe_load(raw)))  # values are YAML: 4 is a number, "4" a string
    return tuple(pairs)


def register(app: typer.Typer) -> None:
    from jobs.kit.options import group

    infra = group(app, "infra", "Cluster manifests: KubeRay RayJobs rendered from infra/kuberay/base.yaml.")

    @infra.command("render")
    def render_cmd(
        command: Optional[List[str]] = typer.Option(None, "--command", help="a job of base.yaml (repeatable; "
                                                    "default: every one): evaluate, audit, ..., regenerate"),
        out: Optional[Path] = typer.Option(None, help="write DIR/rayjob-<job>.yaml (cronjob-<job>-template.yaml "
                                           "for a scheduled job) instead of printing"),
        image: Optional[List[str]] = typer.Option(None, help="REF for every pod, or KIND=REF for one of base.yaml's "
                                                  "images (gpu=..., cpu=...); repeatable"),
        namespace: Optional[str] = typer.Option(None, help="metadata.namespace (default: kubectl's namespace)"),
        set_: Optional[List[str]] = typer.Option(None, "--set", help="PATH=VALUE in each rendered RayJob, value "
                                                 "as YAML: --set spec.backoffLimit=4, --set spec.rayClusterSpec."
                                                 "workerGroupSpecs.0.maxReplicas=16 (repeatable)"),
    ):
        """Render KubeRay RayJob manifests for the commands that run work (`kubectl apply -f` them)."""
        definition = load_definition()
        try:
            files = render(definition, command, _parse_images(image or [], list(definition["images"])),
                           namespace, _parse_sets(set_ or []))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        texts = {name: manifest_text(name, rendered) for name, rendered in files.items()}
        if out is None:
            typer.echo("---\n".join(texts.values()), nl=False)
            return
        out.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            (out / name).write_text(text)
            typer.echo(f"wrote {out / name}", err=True)
