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


def energy_regime(path: Path, regime: dict, workload: str, radios: tuple[str, ...]) -> Path:
    """Each system's joules per edit against the link rate under each radio's power model, and
    on-device over SAKURA in joules and in seconds."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, len(radios), figsize=(5.2 * len(radios), 6.4), sharex=True, squeeze=False)
    rates = regime["rates_mbps"]
    for column, radio in enumerate(radios):
        top, bottom = axes[0][column], axes[1][column]
        for system, values in regime[radio]["joules_median"].items():
            colour, style = SYSTEM_STYLE.get(system, ("#444444", "-"))
            top.plot(rates, _nan(values), style, color=colour, label=system)
        top.set_yscale("log")
        top.set_title(f"{radio}'s power model", fontsize=9)
        bottom.plot(rates, _nan(regime[radio]["ondevice_over_sakura_joules"]), "-", color="#6a994e",
                    label="on-device / SAKURA, joules")
        bottom.plot(rates, _nan(regime["ondevice_over_sakura_seconds"]), "--", color="#6a994e",
                    label="on-device / SAKURA, seconds")
        bottom.axhline(1.0, color="#999999", lw=0.8)
        bottom.set_yscale("log")
        bottom.set_xscale("log")
        bottom.set_xlabel("link rate, Mbit/s")
    axes[0][0].set_ylabel("median joules per edit")
    axes[0][0].legend(fontsize=7)
    axes[1][0].set_ylabel("ratio (>1: SAKURA better)")
    axes[1][0].legend(fontsize=7)
    fig.suptitle(f"{workload}: the regime map in joules", fontsize=10)
    return _save(fig, path)


def _nan(values: list) -> list[float]:
    return [float("nan") if v is None else v for v in values]


def session_curves(path: Path, sustained: dict, workload: str) -> Path:
    """Per edit of a sustained session, one column per cadence and thermal model: median latency and joules."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, len(sustained), figsize=(4.5 * len(sustained), 6.0), sharex=True, squeeze=False)
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
