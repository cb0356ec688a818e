"""How big a scoring pool is: how many scorer actors (`--actors 0` leaves it to `pool_actors`), the CPUs each
asks Ray for and the torch threads each runs, from the cluster's CPUs and memory and the model's weights."""
from __future__ import annotations



def cluster_cpus() -> float:
    import ray

    return float(ray.cluster_resources().get("CPU", 1))


def pool_actors(spec, cpus: float, memory_bytes: float):
    """`spec` (a jobs.plane.scoring_pool.ScoringSpec, not imported: that module imports this one) with its actor
    count settled: as given, else (0) one actor on a GPU or for a served model, and on CPUs one single-threaded actor
    per CPU while their copies of the weights fit in a quarter of the cluster's memory. Why single-threaded: a small
    model's matrices are too small for torch's threads to share well, and on a busy machine (the blind baseline,
    Ray's own processes) a two-thread team waits for its slower thread; one-thread actors score the same parts
    with the same bytes (docs/scaling.md)."""
    from dataclasses import replace

    if spec.actors > 0:
        return spec
    n_models = len(spec.branches)
    if spec.gpus_per_actor > 0 or any(b.api for b in spec.branches) or n_models == 0:
        return replace(spec, actors=1)
    sizes = [weights_bytes(b.model) for b in spec.branches]
    if not all(sizes):  # a weight file we cannot size (a hub id): one actor, as before
        return replace(spec, actors=1)
    n = max(1, int(cpus) // n_models)
    return replace(spec, actors=max(1, min(n, int(0.25 * memory_bytes // sum(sizes)))))


def weights_bytes(model: str) -> int:
    """The bytes of a local model's weight files (0 when `model` is not a local path)."""
    from pathlib import Path

    path = Path(str(model).split("::")[0])
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return 0
    return sum(f.stat().st_size for f in path.iterdir()
               if f.is_file() and f.suffix in (".safetensors", ".bin", ".gguf", ".pt", ".pth"))


def cluster_memory() -> float:
    import ray

    return float(ray.cluster_resources().get("memory", 0))


def scorer_resources(spec, cpus: float) -> tuple[float, int]:
    """CPUs per scorer actor and torch threads in it. Fractional CPUs so that tokenisers and every model's actors
    fit together on a small machine; on a GPU node each scorer takes one CPU to feed its GPU. The isolation
    fallback uses the same numbers: the thread count can change float reductions, and so the last bits."""
    from jobs.plane.tasks import default_threads

    n = max(1, spec.actors * len(spec.branches))
    if spec.gpus_per_actor > 0:
        return 1.0, 2
    return max(0.25, min(1.0, (cpus - 0.5) / n)), default_threads(n)
