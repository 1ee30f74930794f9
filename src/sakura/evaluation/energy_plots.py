"""Figures of ``bench/energy.py`` and ``bench/session.py`` (matplotlib, imported only here)."""

from __future__ import annotations

from pathlib import Path

from sakura.evaluation.plots import SYSTEM_STYLE, _pyplot


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def energy_latency(path: Path, families: dict, workload: str) -> Path:
    """Per trace family, each system's median joules against its median seconds per edit."""
    plt = _pyplot()
    names = [f for f in families if f not in ("cellular", "overall")]
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.4), squeeze=False)
    for ax, family in zip(axes[0], names):
        for system, s in families[family].items():
            if not isinstance(s, dict):
                continue
            colour, _ = SYSTEM_STYLE.get(system, ("#444444", "-"))
            ax.scatter(s["latency_median_s"], s["joules_median"], color=colour, s=22)
            ax.annotate(system, (s["latency_median_s"], s["joules_median"]), fontsize=6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(family, fontsize=9)
        ax.set_xlabel("median seconds per edit", fontsize=8)
    axes[0][0].set_ylabel("median joules per edit", fontsize=8)
    fig.suptitle(f"{workload}: energy against latency (lower left is better)", fontsize=10)
    return _save(fig, path)


def energy_regime(path: Path, regime: dict, workload: str) -> Path:
    """Each system's joules per edit against the link rate, and on-device over SAKURA in joules and seconds."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 6.4), sharex=True)
    rates = regime["rates_mbps"]
    for system, values in regime["joules_median"].items():
        colour, style = SYSTEM_STYLE.get(system, ("#444444", "-"))
        top.plot(rates, [v if v is not None else float("nan") for v in values], style, color=colour, label=system)
    top.set_yscale("log")
    top.set_ylabel("median joules per edit")
    top.legend(fontsize=7)
    for kind, style in (("joules", "-"), ("seconds", "--")):
        values = regime["ondevice_over_sakura"][kind]
        bottom.plot(rates, [v if v is not None else float("nan") for v in values], style, color="#6a994e",
                    label=f"on-device / SAKURA, {kind}")
    bottom.axhline(1.0, color="#999999", lw=0.8)
    bottom.set_yscale("log")
    bottom.set_xscale("log")
    bottom.set_xlabel("link rate, Mbit/s (LTE's power model; 5G's above 100 Mbit/s)")
    bottom.set_ylabel("ratio (>1: SAKURA better)")
    bottom.legend(fontsize=7)
    fig.suptitle(f"{workload}: the regime map in joules", fontsize=10)
    return _save(fig, path)


def session_curves(path: Path, sustained: dict, workload: str) -> Path:
    """Per edit of a sustained session: median latency and joules, throttling phone and not."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 6.0), sharex=True)
    for column, (label, table) in enumerate(sustained.items()):
        for system, summary in table["overall"].items():
            colour, style = SYSTEM_STYLE.get(system, ("#444444", "-"))
            edits = range(1, len(summary["per_edit"]) + 1)
            axes[0][column].plot(edits, [e["latency_median_s"] for e in summary["per_edit"]], style, color=colour,
                                 label=system)
            axes[1][column].plot(edits, [e["joules_median"] for e in summary["per_edit"]], style, color=colour)
        axes[0][column].set_title(label, fontsize=9)
        axes[0][column].set_yscale("log")
        axes[1][column].set_yscale("log")
        axes[1][column].set_xlabel("edit of the session")
    axes[0][0].set_ylabel("median seconds")
    axes[1][0].set_ylabel("median joules")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{workload}: a sustained session, every trace family", fontsize=10)
    return _save(fig, path)


def hit_ratios(path: Path, table: dict, title: str) -> Path:
    """Hit ratio against catalogue size, one line per cache budget and eviction policy."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for (budget, eviction), points in sorted(table.items()):
        sizes = sorted(points)
        ax.plot(sizes, [points[n] for n in sizes], "-o" if eviction == "lru" else "--s", ms=3,
                label=f"{budget}, {eviction}")
    ax.set_xscale("log")
    ax.set_xlabel("templates in the catalogue")
    ax.set_ylabel("hit ratio")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)
