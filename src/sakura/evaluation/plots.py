"""Figures of the end-to-end comparison (matplotlib, imported only here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sakura.edge_client.timeline import Timeline
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.simulator import SYSTEMS, EditSimulator

LEVEL_COLOURS = {"compact": "#8ecae6", "medium": "#219ebc", "full": "#023047",
                 "cachegen-low": "#ffb703", "cachegen-coarse": "#fb8500", "cachegen-fine": "#c75000"}
SYSTEM_STYLE = {"sakura": ("#d62828", "-"), "sakura-own-encoder": ("#9d0208", "-."),
                "sakura-fetch-only": ("#d62828", "--"), "oracle": ("#000000", ":"),
                "cachegen": ("#fb8500", "-"), "cachegen-matched": ("#fb8500", "--"),
                "on-device": ("#6a994e", "-"), "on-device-uncached": ("#386641", ":"),
                "on-device-prepared": ("#a7c957", "--"), "full-sequential": ("#7f7f7f", "-"),
                "sakura-no-pipeline": ("#d62828", ":"), "sakura-fixed-medium": ("#219ebc", "--"),
                "bound": ("#9d4edd", ":")}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(out: Path, runs: dict, examples: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [latency_cdf(out / "latency-cdf.png", runs)]
    for family, ex in examples.items():
        sim: EditSimulator = ex["sim"]
        edits = {name: sim.run(name) for name in ("sakura", "cachegen")}
        title = f"{family}: {ex['trace'].name} at {ex['start']:.0f} s"
        written.append(gantt(out / f"timeline-{family}.png", edits, title))
        written.append(bandwidth(out / f"bandwidth-{family}.png", sim.trace, sim.start, edits["sakura"], family))
    return written


def image_grid(path: Path, rows: list[list[np.ndarray]], *, columns: list[str], row_labels: list[str] | None = None,
               title: str | None = None) -> Path:
    """Images (HxWx3 in [0, 1]) in a grid with a title over each column and, if given, a label
    beside each row: a picture a person understands without the docs."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(rows), len(columns), figsize=(2.1 * len(columns), 2.1 * len(rows) + 0.4),
                             squeeze=False)
    for r, row in enumerate(rows):
        for c, image in enumerate(row):
            ax = axes[r, c]
            ax.imshow(np.clip(image, 0.0, 1.0), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(columns[c], fontsize=8)
            if c == 0 and row_labels:
                ax.set_ylabel(row_labels[r], fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_cdf(path: Path, runs: dict) -> Path:
    plt = _pyplot()
    families = list(runs)
    cols = 3
    rows = -(-len(families) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, family in zip(axes.flat, families):
        for system in [*SYSTEMS, "bound"]:
            values = np.sort(runs[family][system])
            colour, style = SYSTEM_STYLE[system]
            ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", color=colour, linestyle=style,
                    label=system)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(family)
        ax.set_xlabel("edit latency (s)")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(families):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: The compute row's colours: the model's own work, the phone computing template KV, a stall.
COMPUTE_COLOURS = {"model computing": "#6a994e", "template KV computed on the phone": "#9d4edd",
                   "stalled (waiting for a shard)": "#d62828"}
#: The request row: a request from its sending to its first byte (a round trip and the server's time).
REQUEST_COLOUR, REQUEST_LABEL = "#bbbbbb", "request in flight (round trip)"
#: The fetch row before the pipeline starts: the manifest (and what comes bundled with it).
PREAMBLE_COLOUR, PREAMBLE_LABEL = "#e9c46a", "manifest (preamble: fetched before any shard)"


def gantt(path: Path, edits: dict[str, Timeline], title: str) -> Path:
    """Per edit (live or simulated), each stage's work over time: requests in flight on their own
    row (so a request sent while the previous response streams stays visible beside it), the
    manifest's download and the transfer and decode of each fetched shard in its level's colour
    (hatched: left to the phone first, then taken back), and on the compute row the model's work,
    the template KV the phone computed, and stalls."""
    plt = _pyplot()
    height = 2.8 * len(edits) + 0.5  # the legend below the panels, clear of every bar
    fig, axes = plt.subplots(len(edits), 1, figsize=(10, height), sharex=True, squeeze=False)
    for ax, (name, edit) in zip(axes[:, 0], edits.items()):
        if edit.preamble_s > 0:
            ax.barh(2, edit.preamble_s, left=0.0, color=PREAMBLE_COLOUR, height=0.6, edgecolor="white")
        for s in edit.shards:
            colour = LEVEL_COLOURS.get(s.level, "#888888")
            if s.requested_at is not None and s.first_byte_at is not None and s.arrived_at is not None:
                ax.barh(3, s.first_byte_at - s.requested_at, left=s.requested_at, color=REQUEST_COLOUR, height=0.4,
                        edgecolor="white")
                ax.barh(2, s.arrived_at - s.first_byte_at, left=s.first_byte_at, color=colour, height=0.6,
                        edgecolor="white", hatch="//" if s.taken_back else None)
            if s.decode_started_at is not None and s.decoded_at is not None:
                ax.barh(1, max(s.decoded_at - s.decode_started_at, 1e-3), left=s.decode_started_at, color=colour,
                        height=0.6, edgecolor=colour, linewidth=1.0)  # a millisecond's decode still shows
        _compute_row(ax, edit)
        ax.set_yticks([0, 1, 2, 3], ["compute", "decode", "fetch", "request"])
        computed, taken = sum(s.computed for s in edit.shards), sum(s.taken_back for s in edit.shards)
        ax.set_title(f"{name}: {edit.latency_s:.3f} s, stalls {edit.stall_s:.3f} s, "
                     f"{computed}/{len(edit.shards)} blocks computed on the phone"
                     + (f", {taken} taken back from it" if taken else ""), fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the edit began (request: sent until its first byte)")
    colours = legend(edits)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    fig.legend(handles, list(colours), fontsize=7, ncol=3, loc="lower center", frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.5 / height, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def legend(edits: dict[str, Timeline]) -> dict[str, str]:
    """Label -> colour of every kind of box the timeline draws: the request row, the manifest
    where an edit fetched one, the levels these edits used (no others), and the compute row's three."""
    used = {s.level for edit in edits.values() for s in edit.shards if not s.computed}
    preamble = {PREAMBLE_LABEL: PREAMBLE_COLOUR} if any(edit.preamble_s > 0 for edit in edits.values()) else {}
    return {REQUEST_LABEL: REQUEST_COLOUR, **preamble,
            **{f"{level} (fetch, decode)": c for level, c in LEVEL_COLOURS.items() if level in used},
            **COMPUTE_COLOURS}


def _compute_row(ax, edit: Timeline) -> None:
    """The model computes from the start (or a shard's consumption) until it asks for the next;
    a computed shard's template KV fills the time from its request to its consumption."""
    starts = [edit.compute_start] + [s.consumed_at for s in edit.shards]
    ends = [s.needed_at for s in edit.shards] + [edit.latency_s]
    for a, b in zip(starts, ends):
        if a is not None and b is not None:
            ax.barh(0, max(b - a, 0), left=a, color=COMPUTE_COLOURS["model computing"], height=0.6)
    for s in edit.shards:
        if s.computed and s.needed_at is not None and s.consumed_at is not None:
            ax.barh(0, s.consumed_at - s.needed_at, left=s.needed_at,
                    color=COMPUTE_COLOURS["template KV computed on the phone"], height=0.6)
    for stall in edit.stalls:
        ax.barh(0, stall.seconds, left=stall.start, color=COMPUTE_COLOURS["stalled (waiting for a shard)"], height=0.6)


def bandwidth(path: Path, trace: BandwidthTrace, start: float, edit: Timeline, subject: str) -> Path:
    """The link's rate (``trace`` from ``start`` seconds in) over the edit, and where each shard's
    KV came from, on two rows above it: the shards fetched (each over its transfer, in its level's
    colour, the link's rate under it shaded alike) and those the phone computed (purple, over its
    computing), each marked with its index; ``subject`` says whose edit it is."""
    plt = _pyplot()
    horizon = max(edit.latency_s * 1.05, 1e-3)
    t = np.linspace(0, horizon, 400)
    rate = np.array([trace.rate_at(start + x) for x in t])
    unit, per_mbps = ("Mbit/s", 1.0) if rate.max(initial=0.0) >= 1.0 else ("kbit/s", 1e3)
    rate = rate * per_mbps
    top = max(float(rate.max(initial=0.0)), 1e-6)
    rows = {"fetched": top * 1.33, "computed": top * 1.12}  # each row's centre
    height = top * 0.16
    fig, ax = plt.subplots(figsize=(10, 3.6))
    ax.step(t, rate, where="post", color="#333333", label=f"link rate ({trace.name})")
    if edit.preamble_s > 0:
        ax.axvspan(0.0, edit.preamble_s, ymax=1 / 1.5, color=PREAMBLE_COLOUR, alpha=0.5, label=PREAMBLE_LABEL)
    labelled: set[str] = set()
    for s in edit.shards:
        if s.computed:
            a, b, row, label = s.needed_at, s.consumed_at, "computed", "computed on the phone"
            colour = COMPUTE_COLOURS["template KV computed on the phone"]
        else:
            a, b, row, colour = s.first_byte_at, s.arrived_at, "fetched", LEVEL_COLOURS.get(s.level, "#888888")
            label = f"{s.level} (fetched)"
            if a is not None and b is not None:
                ax.fill_between([a, b], 0, top, step=None, color=colour, alpha=0.25, linewidth=0)
        if a is None or b is None:
            continue
        ax.barh(rows[row], max(b - a, horizon * 2e-3), left=a, height=height, color=colour, edgecolor="white",
                label=None if label in labelled else label)
        labelled.add(label)
        ax.text((a + b) / 2, rows[row], str(s.index), ha="center", va="center", fontsize=7,
                color="white" if row == "computed" or s.level == "full" else "black")
    for row, y in rows.items():
        ax.text(horizon, y, f" {row}", ha="left", va="center", fontsize=8, clip_on=False)
    ax.set_xlim(0, horizon)
    ax.set_ylim(0, top * 1.5)
    ax.set_xlabel("seconds since the edit began")
    ax.set_ylabel(f"link rate ({unit})")
    ax.set_title(f"{subject}\nthe link's rate, and each block's KV (its index): fetched at a level, or computed on "
                 "the phone", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


RATIO_STYLE = {"cachegen_over_sakura": ("#fb8500", "CacheGen / SAKURA"),
               "ondevice_over_sakura": ("#6a994e", "on-device (stock, KV-cached) / SAKURA"),
               "ondevice_uncached_over_sakura": ("#386641", "on-device-uncached / SAKURA"),
               "ondevice_prepared_over_sakura": ("#a7c957", "on-device-prepared / SAKURA")}


def regime_map(path: Path, curve, families: dict[str, tuple[float, dict[str, float]]], title: str,
               paper: dict[str, float]) -> Path:
    """Each baseline's latency over SAKURA's against the link rate (above 1: SAKURA is faster), with
    the trace families' medians at their mean rate and the paper's ratios as reference lines."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    for key, (colour, label) in RATIO_STYLE.items():
        points = [(r, v) for r, v in zip(curve.rates_mbps, curve.ratios[key]) if v is not None]
        if points:
            ax.plot(*zip(*points), color=colour, label=label, linewidth=2)
        for rate, ratios in families.values():
            if ratios.get(key):
                ax.scatter([rate], [ratios[key]], color=colour, edgecolor="black", zorder=3, s=36)
    for family, (rate, _) in families.items():
        ax.annotate(family, (rate, 0.02), xycoords=ax.get_xaxis_transform(), fontsize=7, rotation=90, va="bottom")
    ax.axhline(1.0, color="black", linewidth=1)
    hopeless = [r for r, v in zip(curve.rates_mbps, curve.latency_s["sakura"]) if v is None]
    if hopeless:
        ax.axvspan(curve.rates_mbps[0], max(hopeless), color="grey", alpha=0.2,
                   label="not simulated: SAKURA's lower bound > 20x the stock on-device edit")
    for key, value in paper.items():
        ax.axhline(value, color=RATIO_STYLE[key][0], linestyle="--", linewidth=1,
                   label=f"paper: {RATIO_STYLE[key][1]} = {value}x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(curve.rates_mbps[0], curve.rates_mbps[-1])
    ax.set_xlabel("link rate (Mbit/s, constant; dots: trace families at their mean rate)")
    ax.set_ylabel("baseline latency / SAKURA latency (>1: SAKURA faster)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
