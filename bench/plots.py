"""PNG plots of benchmark results (matplotlib, Agg backend)."""
from __future__ import annotations

from pathlib import Path


def plot_throughput(results: list[dict], path: Path, title: str = "") -> Path:
    """tokens/s vs passage length per method, one panel per model; the mixed-length set is the last category."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 4.2), squeeze=False)
    for ax, res in zip(axes[0], results):
        cells = [c["cell"] for c in res["cells"]]
        x = list(range(len(cells)))
        methods = list(res["cells"][0]["methods"])
        for m in methods:
            y = [c["methods"][m].get("tokens_per_s", float("nan")) for c in res["cells"]]  # nan: the run failed
            ax.plot(x, y, marker="o", lw=1.4, label=f"{m} (b={res['cells'][0]['methods'][m]['batch_size']})")
        ax.set_xticks(x, [c if c == "mixed" else f"{c}" for c in cells])
        ax.set_yscale("log")
        ax.set_xlabel("tokens per passage (fixed) / mixed set")
        ax.set_ylabel("tokens/s")
        ax.set_title(f"{res['model']} ({res['params'] / 1e6:.2f}M, {res['dtype']}, {res['device']})", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
