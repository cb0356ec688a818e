"""infra/ is checked, not just shipped: every YAML parses; the Ray cluster launcher config passes Ray's own schema;
runtime_env files are valid RuntimeEnvs; the KubeRay manifests are `tidemark infra render`'s output (committed files
equal a fresh render, through the function and through the CLI), every rendered RayJob passes a schema of the RayJob
fields it uses (unknown fields are errors, so a typo fails) plus the rules KubeRay and Kubernetes add, every command
that runs work has one, and each runs a real `tidemark` command whose arguments the CLI itself parses (command name,
option names and types, required options) on a cluster that can hold what it asks for; the Dockerfile copies what
exists and installs extras that exist; docs/cluster.md's commands parse the same way; Ray versions agree everywhere."""
from __future__ import annotations

import copy
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import typer.main
import yaml

from jobs.commands import infra
from jobs.cli import app
from rayjob_schema import quantity, rayjob_problems

ROOT = Path(__file__).resolve().parents[3]
INFRA = ROOT / "infra"
KUBERAY = INFRA / "kuberay"
SEPARATORS = {"&&", "||", ";", "|"}
# CLI commands that need no cluster: each of the others runs work and must have a RayJob (infra/kuberay/base.yaml).
LOCAL_ONLY = {
    "rescore": "recomputes detectors from saved token stats, without a model: seconds on a laptop",
    "demo": "a self-contained laptop demo (a tiny GPT-2 trained in the process)",
    "infra": "renders these manifests",
    "canary make": "makes a canary set on the owner's machine (seconds, no model)",
}


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def tidemark_invocations(text: str) -> list[list[str]]:
    """Every `tidemark CMD ...` (or `python -m jobs.cli CMD ...`) in a shell command line, as argv lists."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        found.extend(_invocations(shlex.split(line, comments=True)))  # a trailing `# ...` is the shell's comment
    return found


def _invocations(tokens: list[str]) -> list[list[str]]:
    found = []
    for i, tok in enumerate(tokens):
        if tok == "tidemark" or tok.endswith("/bin/tidemark"):
            start = i + 1
        elif tok == "-m" and i + 1 < len(tokens) and tokens[i + 1] == "jobs.cli":
            start = i + 2
        else:
            continue
        argv = []
        for t in tokens[start:]:
            if t in SEPARATORS:
                break
            argv.append(t)
        found.append(argv)
    return found


def check_cli(argv: list[str], monkeypatch) -> dict:
    """Let the CLI's own parser take the arguments (types, choices, required options), without running anything;
    returns the parsed options, defaults included."""
    group = typer.main.get_command(app)
    assert argv and argv[0] in group.commands, f"{argv[:1]} is not a tidemark command ({sorted(group.commands)})"
    name, command, args = argv[0], group.commands[argv[0]], list(argv[1:])
    while hasattr(command, "commands"):  # a group (typer's own click, not `click`): `tidemark infra render ...`
        assert args and args[0] in command.commands, f"{argv}: no {name} subcommand {args[:1]}"
        name, command, args = args[0], command.commands[args[0]], args[1:]
    monkeypatch.chdir(ROOT)  # --config jobs/configs/... is relative to the working dir the job ships
    with command.make_context(name, args) as ctx:
        return dict(ctx.params)


def all_yaml() -> list[Path]:
    return sorted(INFRA.rglob("*.yaml"))


def rayjobs() -> list[tuple[str, dict]]:
    jobs = []
    for path in sorted(KUBERAY.glob("*.yaml")):
        for d in docs(path):
            if d.get("kind") == "RayJob":
                jobs.append((path.name, d))
            if d.get("kind") == "ConfigMap":
                for key, value in d.get("data", {}).items():
                    for inner in yaml.safe_load_all(value):
                        if inner and inner.get("kind") == "RayJob":
                            jobs.append((f"{path.name}:{key}", inner))
    return jobs


def test_every_yaml_parses():
    assert {p.relative_to(INFRA).as_posix() for p in all_yaml()} >= {
        "cluster.yaml", "runtime_env.yaml", "kuberay/base.yaml", "kuberay/rayjob-build-benchmark.yaml",
        "kuberay/rayjob-evaluate.yaml", "kuberay/rayjob-audit.yaml", "kuberay/cronjob-regenerate.yaml",
        "kuberay/cronjob-regenerate-template.yaml", "kuberay/serviceaccount.yaml"}
    for path in all_yaml():
        assert docs(path), path


def test_cluster_launcher_config_passes_rays_schema_and_has_a_gpu_group():
    from ray.autoscaler._private.util import validate_config

    cfg = yaml.safe_load((INFRA / "cluster.yaml").read_text())
    validate_config(cfg)
    types = cfg["available_node_types"]
    assert cfg["head_node_type"] in types
    gpu = [name for name, t in types.items() if t.get("resources", {}).get("GPU", 0) >= 1]
    assert gpu and all(types[n]["max_workers"] >= 1 for n in gpu)
    assert cfg["docker"]["image"]
    for t in types.values():  # credentials come from an instance profile, never from keys in the file
        assert "IamInstanceProfile" in t["node_config"]


@pytest.mark.parametrize("name", ["runtime_env.yaml", "runtime_env.pip.yaml"])
def test_runtime_env_files_are_valid(name):
    from ray.runtime_env import RuntimeEnv

    cfg = yaml.safe_load((INFRA / name).read_text())
    env = RuntimeEnv(**cfg)
    assert ".venv/" in env["excludes"] and "runs/" in env["excludes"]
    from jobs.kit.redact import is_secret_key

    assert cfg.get("env_vars") and not any(is_secret_key(k) for k in cfg["env_vars"])  # no credentials here


def rendered_files() -> dict[str, str]:
    """{file name: text} as `tidemark infra render --out infra/kuberay` writes them."""
    return {name: infra.manifest_text(name, r) for name, r in infra.render(infra.load_definition()).items()}


def test_committed_manifests_are_a_fresh_render():
    rendered = rendered_files()
    committed = {p.name for pattern in ("rayjob-*.yaml", "cronjob-*-template.yaml") for p in KUBERAY.glob(pattern)}
    assert committed == set(rendered), "a rendered manifest is missing, or a committed one is no job of base.yaml"
    for name, text in rendered.items():
        assert (KUBERAY / name).read_text() == text, (
            f"infra/kuberay/{name} is not what base.yaml renders: edit infra/kuberay/base.yaml, then run "
            "`tidemark infra render --out infra/kuberay`")
        assert text.startswith("# generated by `tidemark infra render`; edit infra/kuberay/base.yaml instead")


def test_render_command_prints_the_committed_manifest(tmp_path):
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["infra", "render", "--command", "evaluate"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (KUBERAY / "rayjob-evaluate.yaml").read_text()

    result = CliRunner().invoke(app, ["infra", "render", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == rendered_files()

    bad = CliRunner().invoke(app, ["infra", "render", "--command", "evalute"])
    assert bad.exit_code != 0 and "evalute" in bad.output


def test_render_options_change_every_place_they_name():
    definition = infra.load_definition()
    files = infra.render(definition, ["evaluate", "build-benchmark", "regenerate"], namespace="ml",
                         images={"gpu": "reg.example/tidemark:9"},
                         sets=(("spec.backoffLimit", 5), ("metadata.labels.team", "ml-eval")))
    evaluate = files["rayjob-evaluate.yaml"]["docs"][0]
    build = files["rayjob-build-benchmark.yaml"]["docs"][0]
    config_map = files["cronjob-regenerate-template.yaml"]["docs"][0]
    scheduled = yaml.safe_load(config_map["data"]["rayjob.yaml"])
    assert {c["image"] for c in containers(evaluate)} == {"reg.example/tidemark:9"}
    assert {c["image"] for c in containers(build)} == {definition["images"]["cpu"]}  # only the gpu image changed
    for job in (evaluate, build, scheduled):
        assert job["metadata"]["namespace"] == "ml" and job["spec"]["backoffLimit"] == 5
        assert job["metadata"]["labels"]["team"] == "ml-eval"
    assert config_map["metadata"]["namespace"] == "ml"

    # Paths address lists by index and dotted keys with `\.`; a --set on one pod changes no other pod, even where
    # both pods' fields come from one entry of base.yaml (env).
    worker = "spec.rayClusterSpec.workerGroupSpecs.0.template.spec.containers.0"
    sets = ((f"{worker}.resources.limits.nvidia\\.com/gpu", "2"), (f"{worker}.env.0.name", "HF_TOKEN_WORKER"))
    job = infra.render(definition, ["evaluate"], sets=sets)["rayjob-evaluate.yaml"]["docs"][0]
    head, gpu = containers(job)
    assert "nvidia.com/gpu" not in head["resources"]["limits"] and gpu["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert head["env"][0]["name"] == "HF_TOKEN" and gpu["env"][0]["name"] == "HF_TOKEN_WORKER"
    assert definition["container"]["env"][0]["name"] == "HF_TOKEN"
    with pytest.raises(ValueError, match="not an index"):
        infra.render(definition, ["evaluate"], sets=(("spec.rayClusterSpec.workerGroupSpecs.3.replicas", 1),))


def containers(job: dict) -> list[dict]:
    """Head container(s) first, then each worker group's."""
    cluster = job["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster.get("workerGroupSpecs", [])]
    return [c for pod in pods for c in pod["spec"]["containers"]]


def test_every_rendered_rayjob_passes_the_rayjob_schema():
    jobs = rayjobs()
    assert len(jobs) == len(infra.job_names(infra.load_definition()))
    for where, job in jobs:
        assert rayjob_problems(job) == [], where


def test_the_rayjob_schema_catches_what_it_should():
    (_, good), = [j for j in rayjobs() if j[0] == "rayjob-evaluate.yaml"]
    assert rayjob_problems(good) == []
    cluster = ("spec", "rayClusterSpec")
    worker = (*cluster, "workerGroupSpecs", 0)
    broken = {
        "a misspelt field": (("spec", "shutdownAfterJobFinish"), True),
        "an int in rayStartParams": ((*cluster, "headGroupSpec", "rayStartParams", "num-cpus"), 4),
        "a string replica count": ((*worker, "replicas"), "2"),
        "replicas above maxReplicas": ((*worker, "replicas"), 9),
        "a name with capitals": (("metadata", "name"), "Tidemark-evaluate"),
        "a name too long for KubeRay": (("metadata", "name"), "tidemark-" + "x" * 40),
        "a runtime env Ray refuses": (("spec", "runtimeEnvYAML"), "env_vars: {A: 1}\n"),
        "a GPU request below its limit": ((*worker, "template", "spec", "containers", 0, "resources", "requests",
                                           "nvidia.com/gpu"), "0"),
        "an unknown volume": ((*worker, "template", "spec", "containers", 0, "volumeMounts", 0, "name"), "scratch"),
    }
    for what, (path, value) in broken.items():
        job = copy.deepcopy(good)
        node = job
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert rayjob_problems(job), f"{what} passed"


def gpus_asked(params: dict) -> float:
    """GPUs the command's scorer pools ask for: one pool per model (unlearning-audit and --ref-model: two)."""
    models = 2 if params.get("unlearned") or params.get("ref_model") else 1
    return (params.get("actors") or 1) * (params.get("gpus_per_actor") or 0) * models


def test_rayjobs_run_real_cli_commands_on_a_cluster_that_fits(monkeypatch):
    for where, job in rayjobs():
        spec = job["spec"]
        calls = tidemark_invocations(spec["entrypoint"])
        assert len(calls) == 1, (where, spec["entrypoint"])
        params = check_cli(calls[0], monkeypatch)
        assert spec.get("shutdownAfterJobFinishes") is True and spec.get("activeDeadlineSeconds"), where
        assert spec.get("backoffLimit", 0) >= 1, where  # a lost node must not fail the job for good
        assert not re.search(r"(?i)aws_secret_access_key|AKIA[0-9A-Z]{16}", yaml.safe_dump(job)), where
        env = yaml.safe_load(spec["runtimeEnvYAML"])
        assert env["env_vars"].items() >= docs(INFRA / "runtime_env.yaml")[0]["env_vars"].items(), where
        # Scorers want GPUs, and the cluster must be able to grow to what the command asks for (or it waits forever);
        # a GPU cluster for a job that asks for none wastes them.
        groups = spec["rayClusterSpec"].get("workerGroupSpecs", [])
        gpus_per_pod = [quantity(c["resources"]["limits"].get("nvidia.com/gpu", 0))
                        for g in groups for c in g["template"]["spec"]["containers"]]
        capacity = sum(g["maxReplicas"] * n for g, n in zip(groups, gpus_per_pod))
        assert gpus_asked(params) <= capacity, (where, gpus_asked(params), capacity)
        assert (capacity > 0) == (gpus_asked(params) > 0), where
        # Local input paths are only readable where the data volume is mounted: on every pod that may read them.
        if "/mnt/tidemark/" in spec["entrypoint"]:
            for c in containers(job):
                assert any(m["mountPath"] == "/mnt/tidemark" for m in c["volumeMounts"]), (where, c["name"])


def leaf_commands() -> set[str]:
    """Every command a user can run: `evaluate`, and a group's subcommands as `canary test`."""
    out = set()
    for name, cmd in typer.main.get_command(app).commands.items():
        out |= {f"{name} {sub}" for sub in cmd.commands} if hasattr(cmd, "commands") else {name}
    return out


def test_every_command_that_runs_work_has_a_rayjob():
    commands = leaf_commands()
    local = {c for c in commands if any(c == k or c.startswith(k + " ") for k in LOCAL_ONLY)}
    assert all(any(c == k or c.startswith(k + " ") for c in commands) for k in LOCAL_ONLY)
    covered = {}
    for where, job in rayjobs():
        if where.startswith("rayjob-"):
            argv = tidemark_invocations(job["spec"]["entrypoint"])[0]
            group_command = " ".join(argv[:2])  # `canary test`; a plain command's first argument is an option
            covered[group_command if group_command in commands else argv[0]] = where
    assert set(covered) == commands - local
    assert len(commands - local) == 15
    for command, where in covered.items():
        assert where == f"rayjob-{command.replace(' ', '-')}.yaml"


def test_scheduled_regeneration_moves_the_nonmember_month(monkeypatch):
    from datetime import date

    from jobs.kit import schedule

    parts = docs(KUBERAY / "cronjob-regenerate.yaml")
    cron = next(d for d in parts if d["kind"] == "CronJob")
    template, = docs(KUBERAY / "cronjob-regenerate-template.yaml")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    mount = next(v for v in pod["volumes"] if "configMap" in v)
    assert mount["configMap"]["name"] == template["metadata"]["name"]
    script = " ".join(pod["containers"][0]["args"])
    assert "kubectl create" in script and "__RUN_DATE__" in script
    assert f"/templates/{next(iter(template['data']))}" in script
    role = next(d for d in parts if d["kind"] == "Role")
    assert any("rayjobs" in r["resources"] and "create" in r["verbs"] for r in role["rules"])

    (where, job), = [(w, j) for w, j in rayjobs() if w.startswith("cronjob-regenerate-template.yaml")]
    assert job["metadata"].get("generateName") and "name" not in job["metadata"]  # a new RayJob every month
    argv = tidemark_invocations(job["spec"]["entrypoint"])[0]
    assert argv[0] == "build-benchmark" and argv[argv.index("--nonmember-month") + 1] == "auto"
    assert "--skip-existing" in argv
    # What the CronJob does on 2026-11-02: pin the run date, which picks October and a per-period --out.
    env = yaml.safe_load(job["spec"]["runtimeEnvYAML"].replace("__RUN_DATE__", "2026-11-02"))["env_vars"]
    run_day = schedule.run_date(env[schedule.RUN_DATE_ENV])
    assert run_day == date(2026, 11, 2)
    month = schedule.resolve_month("auto", today=run_day, lag_months=int(argv[argv.index("--nonmember-lag") + 1]))
    out = schedule.fill(argv[argv.index("--out") + 1], schedule.placeholders(month, run_day))
    assert month == "2026-10" and out.endswith("stackmia-2026-10")
    check_cli(argv, monkeypatch)


def test_dockerfile_builds_from_what_exists():
    text = (INFRA / "Dockerfile").read_text()
    assert re.search(r"^FROM \$\{BASE_IMAGE\}", text, re.M)
    for src in re.findall(r"^COPY (?:--\S+ )*(.+?) \S+$", text, re.M):
        for name in src.split():
            assert (ROOT / name).exists(), f"Dockerfile copies {name}, which is not in the repository"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed = [set(e.split(",")) for e in re.findall(r'pip install [^\n]*"\.\[([a-z,]+)\]"', text)]
    for extra in installed:
        assert extra <= set(extras), extra
    assert "ray[default]" in " ".join(extras["cluster"])
    # rayjob-paraphrase.yaml's wordnet rewriter reads WordNet from the `paraphrase` extra's package.
    assert {"cluster", "paraphrase"} <= set().union(*installed)
    assert "tidemark --help" in text


def test_ray_versions_agree():
    import ray

    versions = {"Dockerfile": re.search(r"ARG RAY_VERSION=(\S+)", (INFRA / "Dockerfile").read_text()).group(1)}
    for where, job in rayjobs():
        versions[where] = str(job["spec"]["rayClusterSpec"]["rayVersion"])
    assert set(versions.values()) == {ray.__version__}, versions


def test_documented_commands_parse(monkeypatch):
    text = (ROOT / "docs" / "cluster.md").read_text()
    blocks = re.findall(r"```(?:bash|sh|shell)\n(.*?)```", text, re.S)
    calls = [c for b in blocks for c in tidemark_invocations(re.sub(r"^\s*#.*$", "", b, flags=re.M))]
    assert len(calls) >= 3
    for argv in calls:
        check_cli(argv, monkeypatch)
    assert "ray job submit --working-dir . --runtime-env infra/runtime_env.yaml -- tidemark" in " ".join(
        text.split())
