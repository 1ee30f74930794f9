"""The model-adapter interface: capture template KV in the cloud, replay it on the phone."""

from __future__ import annotations

import abc
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sakura.platform.errors import ImageError, ModelError
from sakura.platform.kv import KVGeometry, KVPair, KVSource, ShardKey, TemplateKV
from sakura.platform.models._attention import AttentionProbe


@dataclass(frozen=True)
class Schedule:
    """A flow-matching Euler schedule: ``x_sigma = (1 - sigma) * x0 + sigma * noise``.

    ``strength`` is the noise level the edit starts from (1.0: pure noise; lower keeps more of
    the user's image, as in SDEdit).
    """

    steps: int = 4
    strength: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or not 1 <= self.steps <= 1000:
            raise ModelError(f"steps must be an integer in [1, 1000], got {self.steps!r}")
        if not 0.0 < self.strength <= 1.0:
            raise ModelError(f"strength must be in (0, 1], got {self.strength!r}")

    def sigmas(self) -> list[float]:
        return [float(s) for s in np.linspace(self.strength, 0.0, self.steps + 1)]

    def pipeline_sigmas(self) -> list[float]:
        """The unshifted sigmas a diffusers flow-matching pipeline is handed for this edit: its
        default ``linspace(1, 1/n, n)`` scaled by the strength (the scheduler shifts them)."""
        return [float(s) for s in np.linspace(1.0, 1.0 / self.steps, self.steps) * self.strength]


@dataclass(frozen=True)
class Template:
    """What a template contributes: its reference image (HxWx3 floats in [0, 1]), its prompt
    and its task (``face_swap``, ``try_on``, ``style_transfer`` or ``custom``)."""

    image: np.ndarray
    prompt: str
    task: str = "custom"


@dataclass(frozen=True)
class EditRequest:
    """The request-specific part of an edit: the user's image and the noise seed."""

    image: np.ndarray
    seed: int = 0


@dataclass
class CaptureResult:
    kv: TemplateKV
    attention_mass: dict[ShardKey, np.ndarray]
    output: torch.Tensor


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    layers: int
    heads: int
    head_dim: int
    resolution: int
    image_tokens: int
    text_tokens: int
    step_dependent: bool
    extra: dict[str, Any] = field(default_factory=dict)


class ModelAdapter(abc.ABC):
    """One model instance, able to capture template KV and to replay it.

    The interface every model family implements: our own denoising loop with template-aware
    attention processors (:class:`~sakura.platform.models.denoising.DenoisingAdapter`), or a
    pipeline's own KV-cache seam (:mod:`sakura.platform.models.pipelines`).
    """

    family: str = ""
    #: True when template KV depends on the timestep (shards keyed by (step, layer)).
    step_dependent: bool = True
    #: Whether replay can hand each shard's queries to an attention probe (our own processors can;
    #: a pipeline's own KV seam cannot).
    supports_probe: bool = True
    #: Whether replay takes a shard as low-rank factors (:class:`~sakura.platform.kv.FactoredPair`)
    #: and attends to it in that form where cheaper (our own processors can; a pipeline's own KV
    #: seam takes K and V, rebuilt).
    attends_factored: bool = True
    #: True when :meth:`full` computes the template tokens once and reuses their KV (a KV-cached
    #: pipeline), False when it computes them at every step.
    full_caches_template: bool = False
    #: True when the phone can compute the template KV itself (:meth:`iter_template_kv`) from the
    #: template's source objects: the template tokens' KV depends on nothing but the template.
    computes_template: bool = False

    def __init__(self, model: torch.nn.Module, *, name: str, resolution: int) -> None:
        self.model = model.eval()
        self.name = name
        self.resolution = resolution
        self._fingerprint: str | None = None

    @abc.abstractmethod
    def info(self) -> ModelInfo: ...

    @abc.abstractmethod
    def capture(
        self, template: Template, request: EditRequest, schedule: Schedule, *, masked: bool = True
    ) -> CaptureResult:
        """Run the template tokens with a calibration request, recording template KV (and, where
        the model exposes it, the attention mass request queries put on each template token)."""

    @abc.abstractmethod
    def full(
        self, template: Template, request: EditRequest, schedule: Schedule, *, masked: bool = True
    ) -> torch.Tensor:
        """The reference: compute the template tokens alongside the request, as a phone without a cache would."""

    @abc.abstractmethod
    def replay(
        self,
        kv: KVSource,
        prompt: str,
        request: EditRequest,
        schedule: Schedule,
        *,
        probe: dict[ShardKey, AttentionProbe] | None = None,
        context: Mapping[str, np.ndarray] | None = None,
    ) -> torch.Tensor:
        """Run the request tokens only, attending to cached template KV.

        ``kv`` may be a stream: each shard is read when the layer that needs it starts.
        ``probe``, when given, receives every shard's queries and request keys/values (families
        that support it). ``context`` holds :meth:`template_context`'s objects.
        """

    @abc.abstractmethod
    def latent_to_image(self, latent: torch.Tensor) -> np.ndarray:
        """Decode a final latent into an HxWx3 image with values in [0, 1]."""

    def template_context(self, template: Template) -> dict[str, np.ndarray]:
        """What replay needs of a template besides its KV, computed once in the cloud (e.g. the
        prompt embeddings of a text encoder the phone never loads). None by default."""
        return {}

    @property
    def encodes_prompt(self) -> bool:
        """Whether this adapter holds the text encoder(s) its context objects come from (loaded as
        the whole pipeline), so a phone that has it may compute them from the template's prompt
        (:meth:`prompt_context`) instead of fetching them."""
        return False

    def prompt_context(self, prompt: str) -> dict[str, np.ndarray]:
        """The context objects of a template with ``prompt``: :meth:`template_context` for models
        whose context is the prompt's embeddings (``encodes_prompt``)."""
        raise ModelError(f"{self.name}: this adapter has no text encoder to compute its context with")

    def context_limits(self) -> dict[str, tuple[int, ...]]:
        """The context objects replay takes and the largest shape of each (what a client checks
        a server's manifest against)."""
        return {}

    def template_source(self, template: Template) -> dict[str, np.ndarray]:
        """What the phone needs to compute the template KV itself (reference latents or pixels),
        computed once in the cloud. Prompt embeddings are context objects, not repeated here.
        Empty for families that cannot compute template KV on the phone."""
        return {}

    def source_from_image(self, image: np.ndarray) -> dict[str, np.ndarray]:
        """:meth:`template_source` of a template with ``image`` (HxWx3 in [0, 1]), made with this
        adapter's own image codec (a phone's VAE): from the template's published image
        (:mod:`sakura.platform.template_image`) the phone makes the source itself."""
        raise ModelError(f"{self.name}: the {self.family or 'this'} family cannot compute template KV on the device")

    def source_limits(self) -> dict[str, tuple[int, ...]]:
        """The source objects :meth:`iter_template_kv` takes and the largest shape of each (what a
        client checks a server's manifest against)."""
        return {}

    def iter_template_kv(
        self, source: Mapping[str, np.ndarray], *, context: Mapping[str, np.ndarray], task: str, schedule: Schedule,
        step: int | None = None,
    ) -> Iterator[tuple[ShardKey, KVPair]]:
        """The template KV computed here from :meth:`template_source`'s objects, block by block,
        bottom-up, in ``kv_geometry(schedule.steps).keys`` order: the caller may stop after any
        block (closing the generator stops the work). Bit-identical to what :meth:`capture`
        records for the template on the same machine.

        A pass of the reference tokens through the blocks gives one shard per block: one pass in
        all for a step-independent model (``step`` must be None), one per step for a per-step
        model, each independent of the others; ``step`` asks for that step's pass only."""
        raise ModelError(f"{self.name}: the {self.family or 'this'} family cannot compute template KV on the device")

    def _one_pass(self, step: int | None) -> None:
        """A step-independent model's template KV is one pass: no step's pass of its own."""
        if step is not None:
            raise ModelError(f"{self.name}: the template KV does not depend on the step (asked for step {step})")

    # -- shared ---------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """sha256 of the adapter scheme, the model config and every weight."""
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.model, self._fingerprint_extra())
        return self._fingerprint

    def _fingerprint_extra(self) -> dict[str, Any]:
        return {"family": self.family, "resolution": self.resolution}

    def kv_geometry(self, steps: int) -> KVGeometry:
        """The template KV this model replays with ``steps`` steps: shard keys in the order replay
        reads them (steps, then layers), one (heads, image tokens, head_dim) shape, the model's dtype."""
        info = self.info()
        step_ids: list[int | None] = list(range(steps)) if self.step_dependent else [None]
        keys = tuple(ShardKey(s, layer) for s in step_ids for layer in range(info.layers))
        dtype = np.dtype(str(next(self.model.parameters()).dtype).removeprefix("torch."))
        return KVGeometry(keys, (info.heads, info.image_tokens, info.head_dim), dtype)

    def edit_image(self, kv: TemplateKV, prompt: str, request: EditRequest, schedule: Schedule,
                   *, context: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        return self.latent_to_image(self.replay(kv, prompt, request, schedule, context=context))

    def _check_kv(self, kv: KVSource, schedule: Schedule) -> None:
        if kv.model_fingerprint != self.fingerprint:
            raise ModelError(
                f"template KV was built for model {kv.model_fingerprint[:12]}, "
                f"not {self.name} ({self.fingerprint[:12]})"
            )
        available = set(kv.keys)
        missing = [key for key in self.kv_geometry(schedule.steps).keys if key not in available]
        if missing:
            raise ModelError(
                f"template KV lacks {len(missing)} shard(s) needed for {schedule.steps} steps, e.g. {missing[0]}"
            )


def model_fingerprint(model: torch.nn.Module, extra: dict[str, Any]) -> str:
    """sha256 over the adapter scheme, the model's config and every parameter and buffer."""
    h = hashlib.sha256()
    # diffusers' private config keys (library version, load path, the *set* of defaulted keys,
    # whose order changes from process to process) say nothing about the model itself.
    config = {k: v for k, v in dict(getattr(model, "config", {}) or {}).items() if not k.startswith("_")}
    identity = {"class": type(model).__name__, "config": config, "extra": extra}
    h.update(json.dumps(identity, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.flatten().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def source_array(
    source: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...], dtype: str = "float32"
) -> np.ndarray:
    """Source object ``name`` checked to be exactly ``shape`` and ``dtype`` and finite: the bytes
    passed a sha256 check, but only the model may say what shape it computes from."""
    if name not in source:
        raise ModelError(f"template source lacks {name!r} (has {sorted(source)})")
    array = np.asarray(source[name])
    if array.shape != shape or array.dtype != np.dtype(dtype):
        raise ModelError(f"template source {name!r} is {array.dtype} {array.shape}; the model takes {dtype} {shape}")
    if not np.isfinite(array).all():
        raise ModelError(f"template source {name!r} has non-finite values")
    return array


def to_unit_image(image: np.ndarray) -> np.ndarray:
    """Validate an HxWx3 image and return it as float32 in [0, 1]."""
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ImageError(f"expected an HxWx3 RGB image, got shape {arr.shape}")
    if arr.dtype == np.uint8:
        return arr.astype(np.float32) / 255.0
    arr = arr.astype(np.float32)
    if not np.isfinite(arr).all() or arr.min() < 0.0 or arr.max() > 1.0:
        raise ImageError("float images must have finite values in [0, 1]")
    return arr
