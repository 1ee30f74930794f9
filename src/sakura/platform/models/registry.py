"""Models by name: seeded tiny configs for tests and the demo, or a diffusers checkpoint on disk.

Named configs are registered explicitly in ``_NAMED``; a path that is a directory is loaded as
a diffusers checkpoint (the transformer at the top level or in ``transformer/``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from sakura.platform.errors import UnknownModel, did_you_mean, shown
from sakura.platform.lazy import resolve
from sakura.platform.models.base import ModelAdapter
from sakura.platform.models.pipelines import is_pipeline_folder, load_pipeline
from sakura.platform.models.pipelines.folder import PipelineError, read_json
from sakura.platform.models.seeding import seed_weights

if TYPE_CHECKING:
    from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel
    from diffusers.models.transformers.transformer_sd3 import SD3Transformer2DModel


@dataclass(frozen=True)
class NamedModel:
    name: str
    family: str
    description: str
    config: dict[str, Any]
    resolution: int
    pack: int
    text_tokens: int
    seed: int = 0
    #: Scale of the seeded weights relative to PyTorch's default init. Random DiTs at the
    #: default scale barely look at the template; twice the scale makes its effect measurable.
    init_gain: float = 2.0
    #: Denoising steps a library is built for (step-dependent models need one shard per step).
    default_steps: int = 4
    #: Builds the adapter itself (a pipeline's model: transformer, VAE, scheduler) instead of
    #: ``family`` + ``config``: a function, or its ``"module:function"`` name, imported only when
    #: the model is built (so the registry imports no pipeline code).
    build: Callable[[NamedModel, torch.dtype], ModelAdapter] | str | None = None


_NAMED: dict[str, NamedModel] = {}


def register_model(spec: NamedModel) -> None:
    _NAMED[spec.name] = spec


register_model(NamedModel(
    name="tiny-flux",
    family="flux",
    description="Flux layout, 2 dual + 2 single blocks, 4x16 heads, 32x32 pixels -> 256 image tokens",
    config=dict(patch_size=1, in_channels=12, num_layers=2, num_single_layers=2, attention_head_dim=16,
                num_attention_heads=4, joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=(4, 6, 6)),
    resolution=32, pack=2, text_tokens=8,
))
register_model(NamedModel(
    name="tiny-sd3",
    family="sd3",
    description="SD3 layout, 4 joint blocks, 4x16 heads, 32x32 pixels -> 256 image tokens",
    config=dict(sample_size=32, patch_size=2, in_channels=3, num_layers=4, attention_head_dim=16,
                num_attention_heads=4, joint_attention_dim=32, caption_projection_dim=64,
                pooled_projection_dim=32, out_channels=3, pos_embed_max_size=32),
    resolution=32, pack=1, text_tokens=8,
))
register_model(NamedModel(
    name="bench-flux",
    family="flux",
    description="Flux layout at benchmark scale: 4 dual + 8 single blocks, 12x64 heads, 1024 image tokens",
    config=dict(patch_size=1, in_channels=12, num_layers=4, num_single_layers=8, attention_head_dim=64,
                num_attention_heads=12, joint_attention_dim=256, pooled_projection_dim=256, axes_dims_rope=(8, 28, 28)),
    resolution=64, pack=2, text_tokens=64,
))
register_model(NamedModel(
    name="klein-4b-shape",
    family="flux2-klein",
    description="FLUX.2 [klein] 4B's shapes, random weights: 5 double + 20 single blocks, 24x128 heads, "
                "random prompt embeddings for its text encoder, 512x512 -> 1024 reference tokens (16 GB in fp32)",
    config={}, resolution=512, pack=16, text_tokens=512, init_gain=1.0,
    build="sakura.platform.models.pipelines.klein_shapes:build_klein_4b",  # its config is KLEIN_4B's
))


def named_models() -> dict[str, NamedModel]:
    return dict(_NAMED)


def model_catalogue() -> list[tuple[str, str, str]]:
    """(name, family, description) of every model loadable by name: the trained reference model
    first, then the seeded configs."""
    reference = ("reference", "reference", "the trained reference editing DiT shipped with the package "
                 "(32x32 pixels, 6 blocks; the one libraries and the demo use)")
    return [reference, *((m.name, m.family, m.description) for m in _NAMED.values())]


REFERENCE_DEFAULT_STEPS = 8


def default_steps(name: str) -> int:
    """The denoising steps a model's libraries are built for unless told otherwise."""
    if name == "reference":
        return REFERENCE_DEFAULT_STEPS
    return _NAMED[name].default_steps if name in _NAMED else 4


def load_named_model(name: str, *, dtype: torch.dtype = torch.float32) -> ModelAdapter:
    """A named model only, never a path: what a client may load for a name a server sent."""
    if name != "reference" and name not in _NAMED:
        raise UnknownModel(
            f"no model named {name!r} on this device (named models: {', '.join(sorted(_NAMED))}, reference)"
        )
    return load_model(name, dtype=dtype)


def load_model(name_or_path: str, *, dtype: torch.dtype = torch.float32, phone: bool = False) -> ModelAdapter:
    """A ready adapter for a named config, the trained ``reference`` model, a diffusers pipeline
    folder (``model_index.json``; ``phone`` loads only what replay needs) or a bare transformer
    checkpoint directory."""
    if name_or_path == "reference":
        from sakura.platform.models.reference import load_reference

        return load_reference()
    if name_or_path in _NAMED:
        return _build_named(_NAMED[name_or_path], dtype)
    path = Path(name_or_path).expanduser()
    if is_pipeline_folder(path):
        return load_pipeline(path, phone=phone, dtype=dtype)
    if path.is_dir():
        return _load_checkpoint(path, dtype)
    names = sorted([*_NAMED, "reference"])
    raise UnknownModel(f"unknown model {shown(name_or_path)}{did_you_mean(name_or_path, names)} (not a named "
                       f"model: {', '.join(names)}; nor a diffusers checkpoint directory)")


def _build_named(spec: NamedModel, dtype: torch.dtype) -> ModelAdapter:
    if isinstance(spec.build, str):
        return resolve(spec.build)(spec, dtype)
    if spec.build is not None:
        return spec.build(spec, dtype)
    model = _model_class(spec.family)(**spec.config)
    seed_weights(model, spec.seed, gain=spec.init_gain)
    if dtype != torch.float32:
        model = model.to(dtype)
    return _adapter_class(spec.family)(
        model, name=spec.name, resolution=spec.resolution, pack=spec.pack, text_tokens=spec.text_tokens
    )


def _load_checkpoint(path: Path, dtype: torch.dtype) -> ModelAdapter:
    root = path / "transformer" if (path / "transformer" / "config.json").is_file() else path
    config_file = root / "config.json"
    if not config_file.is_file():
        raise UnknownModel(f"{path} has no config.json (looked in {root})")
    try:
        config = read_json(config_file)
    except PipelineError as exc:
        raise UnknownModel(str(exc)) from None
    class_name = str(config.get("_class_name", "")) if isinstance(config, dict) else ""
    family = {"FluxTransformer2DModel": "flux", "SD3Transformer2DModel": "sd3"}.get(class_name)
    if family is None:
        raise UnknownModel(f"{config_file}: unsupported model class {class_name[:100]!r}")
    model = _model_class(family).from_pretrained(root, torch_dtype=dtype)
    defaults = _CHECKPOINT_IO[family]
    return _adapter_class(family)(model, name=str(path), **defaults)


# Image size and latent packing for checkpoints: 512x512 pixels -> 64x64 latent cells of 8x8.
_CHECKPOINT_IO: dict[str, dict[str, int]] = {
    "flux": dict(resolution=512, pack=16, text_tokens=64),
    "sd3": dict(resolution=512, pack=8, text_tokens=64),
}


def _model_class(family: str) -> type[FluxTransformer2DModel] | type[SD3Transformer2DModel]:
    # Imported from their modules: to a type checker, diffusers' top-level names are its no-torch placeholders.
    if family == "flux":
        from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel

        return FluxTransformer2DModel
    from diffusers.models.transformers.transformer_sd3 import SD3Transformer2DModel

    return SD3Transformer2DModel


def _adapter_class(family: str) -> Callable[..., ModelAdapter]:
    if family == "flux":
        from sakura.platform.models.flux import FluxAdapter

        return FluxAdapter
    from sakura.platform.models.sd3 import SD3Adapter

    return SD3Adapter
