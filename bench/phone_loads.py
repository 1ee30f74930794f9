"""What the phone loads: components, parameters and peak RSS under SAKURA vs the stock pipeline.

    python bench/phone_loads.py [--pipelines tiny-klein tiny-kontext ...] [--json bench/out/phone-loads.json]

For every tiny pipeline ``sakura models export`` writes (all of them unless ``--pipelines``):
each component's class, parameters and bytes on disk; which components SAKURA's phone loads
(recorded in a child process that loads the folder for the phone and replays a template's KV)
and which the stock pipeline loads (all of them); and the peak RSS (``ru_maxrss``) of one edit
each way, each in a fresh child process:

- ``sakura_phone``: the phone's components only, replaying KV and prompt embeddings the cloud
  made in another process, then VAE-decoding; ``transformers`` is hidden from it, as on a phone
  that does not ship it (diffusers imports it whenever it is installed);
- ``stock``: every component, the text encoder run on the prompt, the pipeline's own
  ``__call__`` as it ships (what the parity test compares against);
- ``sakura_cloud``: what a build runs once per template (capture and prompt embeddings);
- ``imports_phone`` / ``imports_cloud``: the floors, ``import torch, diffusers,
  sakura.platform.models`` and nothing else, without and with ``transformers``.

Then FLUX.2 [klein] 4B and 9B from their configs (parameters counted on the meta device; where
the numbers come from: ``sakura.platform.models.pipelines.klein_shapes.SOURCES``).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _args import bench_parser
from _provenance import provenance

OUT = Path(__file__).resolve().parent / "out" / "phone-loads.json"
STEPS, STRENGTH = 4, 0.8
MODES = ("imports_phone", "imports_cloud", "sakura_cloud", "sakura_phone", "stock")


def main() -> int:
    from sakura.platform.models.pipelines.tiny import TINY_PIPELINES

    parser = bench_parser(__doc__, json_default=OUT)
    parser.add_argument("--pipelines", nargs="+", default=sorted(TINY_PIPELINES), choices=sorted(TINY_PIPELINES))
    args = parser.parse_args()
    report: dict[str, Any] = {"provenance": provenance("sakura.platform.models"), "steps": STEPS,
                              "strength": STRENGTH, "tiny": {}, "configs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.pipelines:
            report["tiny"][name] = tiny_report(name, Path(tmp))
            print_tiny(name, report["tiny"][name])
    for shape in _shapes():
        report["configs"][shape.name] = config_report(shape)
    print_configs(report["configs"])
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.json}")
    return 0


def tiny_report(name: str, tmp: Path) -> dict[str, Any]:
    """One tiny pipeline: its components, then one edit each way in child processes."""
    from sakura.platform.models.pipelines.folder import PIPELINE_KINDS, PipelineFolder
    from sakura.platform.models.pipelines.tiny import export

    folder_path = export(name, tmp / name)
    folder = PipelineFolder.read(folder_path)
    kind = PIPELINE_KINDS[folder.class_name]
    components = {c: _component(folder, c) for c in sorted(folder.components)}
    kv_file = tmp / f"{name}-kv.npz"
    runs = {mode: _child(mode, folder_path, kv_file) for mode in MODES}
    phone = runs["sakura_phone"]["loaded"]
    floor = runs["imports_phone"]["peak_rss_bytes"]
    return {"pipeline": folder.class_name, "components": components,
            "declared": {"phone": list(kind.phone), "cloud": list(kind.cloud)},
            "loads": {"sakura_phone": phone, "stock": runs["stock"]["loaded"]},
            "parameters": {"sakura_phone": sum(components[c]["parameters"] for c in phone),
                           "stock": sum(components[c]["parameters"] for c in runs["stock"]["loaded"])},
            "peak_rss_bytes": {m: runs[m]["peak_rss_bytes"] for m in ("sakura_phone", "stock")},
            "peak_rss_above_imports_bytes": {m: runs[m]["peak_rss_bytes"] - floor for m in ("sakura_phone", "stock")},
            "runs": runs}


def _component(folder: Any, name: str) -> dict[str, Any]:
    import torch

    obj = folder.load(name)
    params = sum(p.numel() for p in obj.parameters()) if isinstance(obj, torch.nn.Module) else 0
    disk = sum(f.stat().st_size for f in (folder.path / name).rglob("*") if f.is_file())
    return {"class": folder.components[name][1], "parameters": params, "disk_bytes": disk}


def _child(mode: str, folder: Path, kv_file: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(folder), str(kv_file)],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} on {folder.name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the child processes ------------------------------------------------------------------
def child(mode: str, folder: str, kv_file: str) -> dict[str, Any]:
    if mode in ("imports_phone", "sakura_phone"):
        _hide_transformers()
    import diffusers  # noqa: F401
    import numpy as np
    import torch  # noqa: F401

    import sakura.platform.models  # noqa: F401

    out: dict[str, Any] = {"mode": mode}
    if mode == "imports_cloud":
        import transformers  # noqa: F401
    if not mode.startswith("imports"):
        loaded = _record_loads()
        run = {"sakura_cloud": _cloud, "sakura_phone": _phone, "stock": _stock}[mode]
        out.update(run(folder, Path(kv_file)))
        out["loaded"] = loaded
    out["transformers_imported"] = "transformers" in sys.modules
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB
    out["rss_end_bytes"] = _rss_now()
    out["finite"] = bool(np.isfinite(out.pop("image", np.zeros(1))).all())
    return out


def _rss_now() -> int:
    """The resident set now (Linux's VmRSS), 0 where /proc is absent."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _hide_transformers() -> None:
    """Make ``transformers`` look uninstalled: diffusers then never imports it."""
    import importlib.util

    find_spec = importlib.util.find_spec

    def hidden(name: str, *args: Any) -> Any:
        return None if name.split(".")[0] == "transformers" else find_spec(name, *args)

    class Absent:
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name.split(".")[0] == "transformers":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    importlib.util.find_spec = hidden  # type: ignore[assignment]
    sys.meta_path.insert(0, Absent())  # type: ignore[arg-type]


def _record_loads() -> list[str]:
    """The components this process loads, in order (every load goes through PipelineFolder.load)."""
    from sakura.platform.models.pipelines.folder import PipelineFolder

    loaded: list[str] = []
    original = PipelineFolder.load

    def load(self: Any, name: str, **kwargs: Any) -> Any:
        loaded.append(name)
        return original(self, name, **kwargs)

    PipelineFolder.load = load  # type: ignore[method-assign]
    return loaded


def _edit(resolution: int) -> tuple[Any, Any, Any]:
    from sakura.evaluation.block_costs import bench_edit
    from sakura.platform.models import Schedule

    return (*bench_edit(resolution), Schedule(steps=STEPS, strength=STRENGTH))


def _cloud(folder: str, kv_file: Path) -> dict[str, Any]:
    import numpy as np

    from sakura.platform.models import load_model

    adapter = load_model(folder)
    template, request, schedule = _edit(adapter.resolution)
    kv = adapter.capture(template, request, schedule).kv
    arrays = {f"kv/{'n' if k.step is None else k.step}/{k.layer}/{part}": getattr(kv[k], part)
              for k in kv.keys for part in ("k", "v")}
    arrays |= {f"context/{name}": value for name, value in adapter.template_context(template).items()}
    np.savez(kv_file, fingerprint=np.array(kv.model_fingerprint), **arrays)
    return {"kv_bytes": kv.nbytes}


def _phone(folder: str, kv_file: Path) -> dict[str, Any]:
    import numpy as np

    from sakura.platform.kv import KVPair, ShardKey, TemplateKV
    from sakura.platform.models import load_model

    adapter = load_model(folder, phone=True)
    template, request, schedule = _edit(adapter.resolution)
    saved = np.load(kv_file)
    shards, context = {}, {}
    for name in saved.files:
        parts = name.split("/")
        if parts[0] == "kv" and parts[3] == "k":
            step = None if parts[1] == "n" else int(parts[1])
            shards[ShardKey(step, int(parts[2]))] = KVPair(saved[name], saved[name[:-1] + "v"])
        elif parts[0] == "context":
            context[parts[1]] = saved[name]
    kv = TemplateKV(str(saved["fingerprint"]), shards)
    return {"image": adapter.edit_image(kv, template.prompt, request, schedule, context=context)}


def _stock(folder: str, kv_file: Path) -> dict[str, Any]:
    from sakura.platform.models import load_model

    adapter = load_model(folder)
    template, request, schedule = _edit(adapter.resolution)
    # The pipeline as it ships (per-step pipelines also have a masked one); an empty context
    # makes it run its own text encoder on the prompt.
    stock = getattr(adapter, "unmodified_stock_image", adapter.stock_image)
    return {"image": stock(template, request, schedule, {})}


# -- klein 4B / 9B from their configs -------------------------------------------------------
def _shapes() -> list[Any]:
    from sakura.platform.models.pipelines.klein_shapes import KLEIN_4B, KLEIN_9B

    return [KLEIN_4B, KLEIN_9B]


def config_report(shape: Any) -> dict[str, Any]:
    from sakura.platform.models.pipelines.folder import PIPELINE_KINDS
    from sakura.platform.models.pipelines.klein_shapes import parameter_counts

    kind = PIPELINE_KINDS["Flux2KleinKVPipeline"]
    params = parameter_counts(shape)
    components = {"transformer": params["transformer"], "vae": params["vae"], "text_encoder": params["text_encoder"],
                  "tokenizer": 0, "scheduler": 0}
    phone = [c for c in kind.phone if c in components]
    return {"text_encoder": shape.text_encoder_name, "components": components, "phone": phone,
            "cloud_only": [c for c in kind.cloud if c in components],
            "parameters": {"sakura_phone": sum(components[c] for c in phone), "stock": sum(components.values())}}


# -- printing --------------------------------------------------------------------------------
def _mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def print_tiny(name: str, r: dict[str, Any]) -> None:
    phone, stock = set(r["loads"]["sakura_phone"]), set(r["loads"]["stock"])
    print(f"\n{name} ({r['pipeline']})")
    print(f"  {'component':16s} {'class':32s} {'params':>10s} {'disk':>10s}  SAKURA phone  stock")
    for c, info in r["components"].items():
        print(f"  {c:16s} {info['class']:32s} {info['parameters']:10,d} {info['disk_bytes']:10,d}  "
              f"{'yes' if c in phone else 'cloud':>12s}  {'yes' if c in stock else '-':>5s}")
    print(f"  parameters: SAKURA phone {r['parameters']['sakura_phone']:,d}, stock {r['parameters']['stock']:,d}")
    runs = r["runs"]
    floor = runs["imports_phone"]["peak_rss_bytes"]
    for mode in MODES:
        rss = runs[mode]["peak_rss_bytes"]
        print(f"  peak RSS {mode:13s} {_mib(rss):>9s} ({(rss - floor) / 2**20:+6.1f} MiB over imports_phone; "
              f"{_mib(runs[mode]['rss_end_bytes'])} at the end)  "
              f"transformers imported: {runs[mode]['transformers_imported']}")


def print_configs(configs: dict[str, Any]) -> None:
    for name, r in configs.items():
        print(f"\n{name} (text encoder {r['text_encoder']}; from configs, bf16 = 2 bytes a parameter)")
        for c, n in r["components"].items():
            where = "phone + cloud" if c in r["phone"] else "cloud only" if c in r["cloud_only"] else "-"
            print(f"  {c:14s} {n / 1e9:8.3f} B params {n * 2 / 1e9:7.2f} GB bf16  SAKURA: {where}")
        p = r["parameters"]
        print(f"  the phone loads {p['sakura_phone'] / 1e9:.2f} B parameters under SAKURA, {p['stock'] / 1e9:.2f} B "
              f"with the stock pipeline ({p['sakura_phone'] / p['stock']:.0%})")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4])))
        sys.exit(0)
    sys.exit(main())
