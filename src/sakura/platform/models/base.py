"""The model-adapter interface: capture template KV in the cloud, replay it on the phone.

An adapter wraps one model instance. It installs template-aware attention processors on that
instance (never anything process-global) and runs a flow-matching denoising loop in one of the
modes of :mod:`sakura.platform.models._attention`.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import torch

from sakura.platform.errors import ImageError, ModelError
from sakura.platform.kv import KVGeometry, KVPair, KVSource, ShardKey, TemplateKV
from sakura.platform.models._attention import AttentionProbe, Mode, RunState, new_state_var


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
    """One model instance, able to capture template KV and to replay it."""

    family: str = ""
    #: True when template KV depends on the timestep (shards keyed by (step, layer)).
    step_dependent: bool = True

    def __init__(self, model: torch.nn.Module, *, name: str, resolution: int) -> None:
        self.model = model.eval()
        self.name = name
        self.resolution = resolution
        self._state = new_state_var(name)
        self._fingerprint: str | None = None
        self._install_processors()

    # -- what each family provides -------------------------------------------------------
    @abc.abstractmethod
    def _install_processors(self) -> None:
        """Install template-aware attention processors on this instance's attention modules."""

    @abc.abstractmethod
    def _image_latent(self, image: np.ndarray, *, template: bool) -> torch.Tensor:
        """The model-native latent of an image (request or template)."""

    @abc.abstractmethod
    def _condition(self, prompt: str, request: EditRequest) -> Any:
        """What the request side needs besides the latent (prompt embeddings, the user image)."""

    @abc.abstractmethod
    def _velocity(self, x: torch.Tensor, sigma: float, cond: Any, template: Any | None) -> torch.Tensor:
        """One model call: the flow velocity for latent ``x`` at noise level ``sigma``."""

    def _template_input(self, template: Template) -> Any:
        """What the model needs of the template (its latent, by default)."""
        return self._image_latent(template.image, template=True)

    @abc.abstractmethod
    def info(self) -> ModelInfo: ...

    @abc.abstractmethod
    def latent_to_image(self, latent: torch.Tensor) -> np.ndarray:
        """Decode a final latent into an HxWx3 image with values in [0, 1]."""

    # -- the public operations -----------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """sha256 of the adapter scheme, the model config and every weight."""
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.model, self._fingerprint_extra())
        return self._fingerprint

    def _fingerprint_extra(self) -> dict[str, Any]:
        return {"family": self.family, "resolution": self.resolution}

    def capture(
        self, template: Template, request: EditRequest, schedule: Schedule, *, masked: bool = True
    ) -> CaptureResult:
        """Run the loop over template + calibration request tokens, recording template KV and mass."""
        kv: dict[ShardKey, KVPair] = {}
        mass: dict[ShardKey, np.ndarray] = {}
        tpl = self._template_input(template)
        state = RunState(
            mode=Mode.CAPTURE if masked else Mode.UNMASKED,
            template_tokens=self._template_token_count(tpl),
            record_kv=kv,
            record_mass=mass if masked else None,
        )
        output = self._denoise(request, schedule, template.prompt, state, tpl)
        for key, count in state.mass_counts.items():  # step-independent shards: mean over steps
            mass[key] = mass[key] / count
        return CaptureResult(TemplateKV(self.fingerprint, kv), mass, output)

    def full(self, template: Template, request: EditRequest, schedule: Schedule, *, masked: bool = True) -> torch.Tensor:
        """The reference: compute the template tokens alongside the request, as a phone without a cache would."""
        tpl = self._template_input(template)
        mode = Mode.CAPTURE if masked else Mode.UNMASKED
        state = RunState(mode=mode, template_tokens=self._template_token_count(tpl))
        return self._denoise(request, schedule, template.prompt, state, tpl)

    def replay(
        self,
        kv: KVSource,
        prompt: str,
        request: EditRequest,
        schedule: Schedule,
        *,
        probe: dict[ShardKey, AttentionProbe] | None = None,
    ) -> torch.Tensor:
        """Run the loop over request tokens only, attending to cached template KV.

        ``kv`` may be a stream: each shard is read when the layer that needs it starts.
        ``probe``, when given, receives every shard's queries and request keys/values.
        """
        self._check_kv(kv, schedule)
        state = RunState(mode=Mode.REPLAY, template_tokens=kv.template_tokens, replay_kv=kv, probe=probe)
        return self._denoise(request, schedule, prompt, state, None)

    def kv_geometry(self, steps: int) -> KVGeometry:
        """The template KV this model replays with ``steps`` steps: shard keys in the order replay
        reads them (steps, then layers), one (heads, image tokens, head_dim) shape, the model's dtype."""
        info = self.info()
        step_ids: list[int | None] = list(range(steps)) if self.step_dependent else [None]
        keys = tuple(ShardKey(s, layer) for s in step_ids for layer in range(info.layers))
        dtype = np.dtype(str(next(self.model.parameters()).dtype).removeprefix("torch."))
        return KVGeometry(keys, (info.heads, info.image_tokens, info.head_dim), dtype)

    def edit_image(self, kv: TemplateKV, prompt: str, request: EditRequest, schedule: Schedule) -> np.ndarray:
        return self.latent_to_image(self.replay(kv, prompt, request, schedule))

    # -- shared machinery ----------------------------------------------------------------
    def _denoise(
        self, request: EditRequest, schedule: Schedule, prompt: str, state: RunState, template: Any | None
    ) -> torch.Tensor:
        cond = self._condition(prompt, request)
        x0 = self._image_latent(request.image, template=False)
        generator = torch.Generator().manual_seed(int(request.seed))
        noise = torch.randn(x0.shape, generator=generator, dtype=torch.float32).to(x0.dtype)
        sigmas = schedule.sigmas()
        x = (1.0 - sigmas[0]) * x0 + sigmas[0] * noise
        state.template_latent = template
        with torch.inference_mode(), self._running(state):
            for i in range(schedule.steps):
                state.step = i if self.step_dependent else None
                v = self._velocity(x, sigmas[i], cond, template)
                x = x + (sigmas[i + 1] - sigmas[i]) * v
        return x

    @contextlib.contextmanager
    def _running(self, state: RunState) -> Iterator[None]:
        token = self._state.set(state)
        try:
            yield
        finally:
            self._state.reset(token)

    def _current_state(self) -> RunState | None:
        return self._state.get()

    def _template_token_count(self, template_input: Any) -> int:
        return int(template_input.shape[1])

    def _check_kv(self, kv: KVSource, schedule: Schedule) -> None:
        if kv.model_fingerprint != self.fingerprint:
            raise ModelError(
                f"template KV was built for model {kv.model_fingerprint[:12]}, not {self.name} ({self.fingerprint[:12]})"
            )
        available = set(kv.keys)
        missing = [key for key in self.kv_geometry(schedule.steps).keys if key not in available]
        if missing:
            raise ModelError(f"template KV lacks {len(missing)} shard(s) needed for {schedule.steps} steps, e.g. {missing[0]}")


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
