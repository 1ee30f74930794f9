"""Our own denoising loop: template-aware attention processors on a model instance.

A :class:`DenoisingAdapter` installs its processors on one model instance (never anything
process-global) and runs a flow-matching Euler loop in one of the modes of
:mod:`sakura.platform.models._attention`: capture (template tokens masked to attend only to
themselves, their K/V and the attention mass recorded), full, or replay (request tokens only,
cached template K/V inserted where the template's keys would be).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

from sakura.platform.kv import KVPair, KVSource, ShardKey, TemplateKV
from sakura.platform.models._attention import AttentionProbe, Mode, RunState, new_state_var
from sakura.platform.models.base import CaptureResult, EditRequest, ModelAdapter, Schedule, Template


class DenoisingAdapter(ModelAdapter):
    """The families whose attention we run ourselves: Flux and SD3 transformers, the reference model."""

    def __init__(self, model: torch.nn.Module, *, name: str, resolution: int) -> None:
        super().__init__(model, name=name, resolution=resolution)
        self._state = new_state_var(name)
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

    # -- the public operations -----------------------------------------------------------
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

    def full(
        self, template: Template, request: EditRequest, schedule: Schedule, *, masked: bool = True
    ) -> torch.Tensor:
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
        context: Mapping[str, np.ndarray] | None = None,
    ) -> torch.Tensor:
        """Run the loop over request tokens only, attending to cached template KV (these
        families derive everything else from the prompt, so ``context`` is unused)."""
        self._check_kv(kv, schedule)
        state = RunState(mode=Mode.REPLAY, template_tokens=kv.template_tokens, replay_kv=kv, probe=probe,
                         uses_per_shard=1 if self.step_dependent else schedule.steps)
        return self._denoise(request, schedule, prompt, state, None)

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
    def _running(self, state: RunState | None) -> Iterator[None]:
        token = self._state.set(state)
        try:
            yield
        finally:
            self._state.reset(token)

    def _current_state(self) -> RunState | None:
        return self._state.get()

    def _template_token_count(self, template_input: Any) -> int:
        return int(template_input.shape[1])
