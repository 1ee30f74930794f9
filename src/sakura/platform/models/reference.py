"""Adapter for the ``reference`` editing model (:mod:`sakura.platform.models.reference_dit`).

Its template KV depends on neither the request nor the step, so it has one shard per layer
(``ShardKey(None, layer)``). The model reads the run state from the call, not from installed
processors, because its attention is ours to begin with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sakura.platform.errors import ModelError, UnknownModel
from sakura.platform.kv import KVPair, ShardKey
from sakura.platform.models._attention import _to_numpy
from sakura.platform.models._pixels import PixelCodec
from sakura.platform.models.base import EditRequest, ModelInfo, Schedule, Template, source_array, to_unit_image
from sakura.platform.models.denoising import DenoisingAdapter
from sakura.platform.models.reference_dit import ReferenceEditDiT

#: Task index per template task; ``custom`` templates get their own (untrained) embedding.
TASK_INDEX = {"style_transfer": 0, "try_on": 1, "face_swap": 2, "custom": 3}
#: The source object: the template image's pixel cells, (tokens, 3 * patch**2) float32.
TEMPLATE_CELLS = "template_cells"


class ReferenceAdapter(DenoisingAdapter):
    family = "reference"
    step_dependent = False
    computes_template = True
    model: ReferenceEditDiT

    def __init__(self, model: ReferenceEditDiT, *, name: str = "reference") -> None:
        cfg: Any = model.config  # diffusers' FrozenDict, read by attribute
        self.codec = PixelCodec(cfg.resolution, cfg.patch_size, 3 * cfg.patch_size**2)
        super().__init__(model, name=name, resolution=cfg.resolution)

    def _install_processors(self) -> None:
        """Nothing to install: the model's attention takes the run state as an argument."""

    def info(self) -> ModelInfo:
        cfg: Any = self.model.config
        return ModelInfo(name=self.name, family=self.family, layers=cfg.depth, heads=cfg.heads,
                         head_dim=cfg.hidden // cfg.heads, resolution=cfg.resolution,
                         image_tokens=self.codec.grid**2, text_tokens=0, step_dependent=False)

    def _image_latent(self, image: np.ndarray, *, template: bool) -> torch.Tensor:
        cells = self.codec.encode(to_unit_image(image))
        return cells.reshape(1, -1, cells.shape[-1])

    def _template_input(self, template: Template) -> tuple[torch.Tensor, torch.Tensor]:
        return self._image_latent(template.image, template=True), self._task(template.task)

    @staticmethod
    def _task(task: str) -> torch.Tensor:
        if task not in TASK_INDEX:
            raise ModelError(f"the reference model knows tasks {sorted(TASK_INDEX)}, not {task!r}")
        return torch.tensor([TASK_INDEX[task]])

    # -- computing template KV on the phone ------------------------------------------------
    def template_source(self, template: Template) -> dict[str, np.ndarray]:
        """The template image's cells: the phone embeds them itself (the task comes from the manifest)."""
        return self.source_from_image(template.image)

    def source_from_image(self, image: np.ndarray) -> dict[str, np.ndarray]:
        return {TEMPLATE_CELLS: self._image_latent(image, template=True)[0].numpy().astype(np.float32)}

    def source_limits(self) -> dict[str, tuple[int, ...]]:
        return {TEMPLATE_CELLS: (self.codec.grid**2, self.codec.channels)}

    def iter_template_kv(
        self, source: Mapping[str, np.ndarray], *, context: Mapping[str, np.ndarray], task: str, schedule: Schedule,
        step: int | None = None,
    ) -> Iterator[tuple[ShardKey, KVPair]]:
        """One shard per block, bottom-up, from a template-only pass (template tokens attend only
        to themselves in :meth:`capture` too, so the bits are the same)."""
        self._one_pass(step)
        cells = source_array(source, TEMPLATE_CELLS, self.source_limits()[TEMPLATE_CELLS])
        task_index = self._task(task)
        keys = self.kv_geometry(schedule.steps).keys
        return self._template_kv(torch.from_numpy(cells.copy())[None], task_index, keys)

    def _template_kv(self, cells: torch.Tensor, task: torch.Tensor,
                     keys: tuple[ShardKey, ...]) -> Iterator[tuple[ShardKey, KVPair]]:
        blocks = self.model.template_blocks(cells, task)
        try:
            for key in keys:
                with torch.inference_mode():  # only while a block runs: never across a yield
                    k, v = next(blocks)
                yield key, KVPair(k=_to_numpy(k[0]), v=_to_numpy(v[0]))
        finally:
            blocks.close()

    def _template_token_count(self, template_input: Any) -> int:
        return int(template_input[0].shape[1])

    def _condition(self, prompt: str, request: EditRequest) -> torch.Tensor:
        return self._image_latent(request.image, template=False)

    def _velocity(self, x: torch.Tensor, sigma: float, cond: Any, template: Any | None) -> torch.Tensor:
        latent, task = template if template is not None else (None, None)
        t = torch.full((x.shape[0],), sigma)
        return self.model(x, cond, t, latent, task, state=self._current_state())

    def latent_to_image(self, latent: torch.Tensor) -> np.ndarray:
        g = self.codec.grid
        return self.codec.decode(latent.reshape(g, g, -1))


def load_reference(weights_dir: Path | None = None) -> ReferenceAdapter:
    """The trained reference model: the weights shipped with the package (no network needed), or
    those in ``weights_dir``."""
    import json
    from importlib.resources import as_file, files

    if weights_dir is None:
        with as_file(files("sakura.platform.models") / "weights") as shipped:
            return load_reference(Path(shipped))
    from safetensors.torch import load_file

    config_file, weights = weights_dir / "reference.json", weights_dir / "reference.safetensors"
    if not (config_file.is_file() and weights.is_file()):
        raise UnknownModel(f"reference weights not found in {weights_dir}; train them with `sakura train-reference`")
    config = json.loads(config_file.read_text())["model_config"]
    model = ReferenceEditDiT(**{k: v for k, v in config.items() if not k.startswith("_")})
    model.load_state_dict(load_file(str(weights)))
    return ReferenceAdapter(model.eval())
