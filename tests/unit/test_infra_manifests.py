"""infra/ is checked, not just shipped: every YAML parses; the Ray cluster launcher config passes Ray's own schema;
runtime_env files are valid RuntimeEnvs; each RayJob (and the CronJob's RayJob template) runs a real `tidemark`
command whose arguments the CLI itself parses (command name, option names and types, required options); the
Dockerfile copies what exists and installs an extra that exists; docs/cluster.md's commands parse the same way;
Ray versions agree everywhere."""
from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import click
import pytest
import typer.main
import yaml

from jobs.cli import app

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
KUBERAY = INFRA / "kuberay"
SEPARATORS = {"&&", "||", ";", "|"}


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def tidemark_invocations(text: str) -> list[list[str]]:
    """Every `tidemark CMD ...` (or `python -m jobs.cli CMD ...`) in a shell command line, as argv lists."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        found.extend(_invocations(shlex.split(line)))
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


def check_cli(argv: list[str], monkeypatch) -> click.Command:
    """Let the CLI's own parser take the arguments (types, choices, required options), without running anything."""
    group = typer.main.get_command(app)
    assert argv and argv[0] in group.commands, f"{argv[:1]} is not a tidemark command ({sorted(group.commands)})"
    command = group.commands[argv[0]]
    monkeypatch.chdir(ROOT)  # --config jobs/configs/... is relative to the working dir the job ships
    with command.make_context(argv[0], list(argv[1:])) as ctx:
        assert ctx.params is not None
    return command


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
        "cluster.yaml", "runtime_env.yaml", "kuberay/rayjob-build-benchmark.yaml", "kuberay/rayjob-evaluate.yaml",
        "kuberay/rayjob-audit.yaml", "kuberay/cronjob-regenerate.yaml"}
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
    from jobs.redact import is_secret_key

    assert cfg.get("env_vars") and not any(is_secret_key(k) for k in cfg["env_vars"])  # no credentials here


def test_rayjobs_run_real_cli_commands(monkeypatch):
    jobs = rayjobs()
    commands = {}
    for where, job in jobs:
        assert job["apiVersion"] == "ray.io/v1", where
        spec = job["spec"]
        calls = tidemark_invocations(spec["entrypoint"])
        assert len(calls) == 1, (where, spec["entrypoint"])
        check_cli(calls[0], monkeypatch)
        commands.setdefault(calls[0][0], []).append(where)
        cluster = spec["rayClusterSpec"]
        assert cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
        assert cluster["workerGroupSpecs"], where
        assert spec.get("shutdownAfterJobFinishes") is True and spec.get("backoffLimit", 0) >= 1, where
        yaml.safe_load(spec.get("runtimeEnvYAML", "{}"))
        text = yaml.safe_dump(job)
        assert not re.search(r"(?i)aws_secret_access_key|AKIA[0-9A-Z]{16}", text), where
    assert set(commands) >= {"build-benchmark", "evaluate", "audit"}, commands
    for where, job in jobs:
        entry = tidemark_invocations(job["spec"]["entrypoint"])[0][0]
        if entry in ("evaluate", "audit"):  # scorers want GPUs
            groups = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
            limits = [c.get("resources", {}).get("limits", {}) for g in groups
                      for c in g["template"]["spec"]["containers"]]
            assert any(str(lim.get("nvidia.com/gpu", "0")) != "0" for lim in limits), where


def test_scheduled_regeneration_moves_the_nonmember_month(monkeypatch):
    from datetime import date

    from jobs import schedule

    parts = docs(KUBERAY / "cronjob-regenerate.yaml")
    cron = next(d for d in parts if d["kind"] == "CronJob")
    template_name = next(d for d in parts if d["kind"] == "ConfigMap")["metadata"]["name"]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert any(v.get("configMap", {}).get("name") == template_name for v in pod["volumes"])
    script = " ".join(pod["containers"][0]["args"])
    assert "kubectl create" in script and "__RUN_DATE__" in script
    role = next(d for d in parts if d["kind"] == "Role")
    assert any("rayjobs" in r["resources"] and "create" in r["verbs"] for r in role["rules"])

    (where, job), = [(w, j) for w, j in rayjobs() if w.startswith("cronjob-regenerate.yaml")]
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
    for extra in re.findall(r'pip install [^\n]*"\.\[([a-z,]+)\]"', text):
        assert set(extra.split(",")) <= set(extras), extra
    assert "ray[default]" in " ".join(extras["cluster"])
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
