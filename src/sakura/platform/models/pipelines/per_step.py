"""FLUX.1 Kontext and SD3 pipeline folders on SAKURA's own denoising loop (per-step KV).

Stock Kontext and SD3 let reference tokens attend to the user's tokens, and the step's timestep
and the pooled prompt modulate them: their reference KV is neither reusable as they ship nor
independent of the step. SAKURA runs them with the Flux and SD3 adapters' template-aware
processors, so reference tokens attend only to themselves (the OminiControl2 scheme) and shards
are keyed by (step, layer), valid for the template's own prompt. :class:`PerStepPipeline` changes
only what turns images and prompts into the transformer's inputs, and the schedule:

* the template's reference image and the user's photo go through the pipeline's VAE
  (:class:`~.vae_codec.VaeCodec`), and the result is decoded by it;
* the template's prompt goes through the pipeline's text encoders once, in the cloud
  (:meth:`~PerStepPipeline.template_context`: ``prompt_embeds`` and ``pooled_prompt_embeds``); the
  phone, loaded without them, replays from those arrays;
* the pipeline's scheduler steps the latents, with the pipeline's timestep shift.

Under that masking a reference token's KV at a step depends only on the template's latent, the
step's timestep and the template prompt's pooled embedding, so the phone computes it too
(:meth:`~PerStepPipeline.iter_template_kv`): each step's pass runs the reference tokens alone
through the blocks, from the template latent its VAE makes of the template's published JPEG.

An edit is img2img from the user's photo at the schedule's strength: sigmas
``linspace(1, 1/n, n) * strength`` (then shifted by the scheduler), initial latents the photo's
VAE latents noised to the first sigma; no classifier-free guidance (Kontext's embedded guidance
is a setting; SD3 runs at ``guidance_scale=1``). :meth:`~PerStepPipeline.stock_image` runs the
pipeline's own ``__call__`` with the same prompt embeddings, initial latents and sigmas, its
transformer under SAKURA's masking: SAKURA's replay equals it.
:meth:`~PerStepPipeline.unmodified_stock_image` is the pipeline as it ships; the difference is
the price of reusable KV (``stock_psnr_db`` in ``sakura models verify``).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

from sakura.platform.errors import ModelError
from sakura.platform.kv import KVPair, KVSource, ShardKey
from sakura.platform.models._attention import AttentionProbe, Mode, RunState
from sakura.platform.models._block_stream import stream_after_modules
from sakura.platform.models._diffusers import DiffusersAdapter
from sakura.platform.models.base import EditRequest, Schedule, Template, model_fingerprint, source_array
from sakura.platform.models.pipelines.folder import PipelineError, PipelineFolder
from sakura.platform.models.pipelines.klein import PROMPT_EMBEDS
from sakura.platform.models.pipelines.vae_codec import calculate_shift

POOLED_PROMPT_EMBEDS = "pooled_prompt_embeds"
#: The source object: the template image's latent as the transformer takes it (float32).
TEMPLATE_LATENT = "template_latent"


def config_error(folder: PipelineFolder, component: str, field: str, message: str) -> PipelineError:
    return PipelineError(f"{folder.path / component / 'config.json'}: field {field!r}: {message}")


class PerStepPipeline(DiffusersAdapter):
    """Goes ahead of :class:`~sakura.platform.models.flux.FluxAdapter` or
    :class:`~sakura.platform.models.sd3.SD3Adapter` in an adapter's bases (they provide the
    processors, ``_velocity``, ``_image_latent`` through ``codec``, and the run state); ``pipe``
    (the stock pipeline, text encoders included) exists in the cloud only."""

    pipeline_class: str = ""
    #: ``calculate_shift``'s fallback ``max_shift`` in the pipeline's module.
    default_max_shift: float = 1.15
    computes_template = True

    def _attach(self, *, vae: Any, scheduler: Any, pipe: Any | None, max_sequence_length: int) -> None:
        self.vae, self.scheduler, self.pipe = vae, scheduler, pipe
        self.max_sequence_length = max_sequence_length
        if pipe is not None:
            pipe.set_progress_bar_config(disable=True)

    # -- what each pipeline provides -----------------------------------------------------
    @abc.abstractmethod
    def _encode_prompt(self, pipe: Any, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The pipeline's ``encode_prompt``: (prompt embeddings (1, L, D), pooled (1, P))."""

    @abc.abstractmethod
    def _stock_state(self, template: Template) -> RunState:
        """SAKURA's masking inside the stock pipeline's own call (reference tokens self-attend)."""

    @abc.abstractmethod
    def _call_stock(self, pipe: Any, template: Template, common: dict[str, Any]) -> Any:
        """The stock ``__call__`` with this pipeline's reference input, if any."""

    # -- identity ------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """The transformer, the VAE (reference latents, the result) and the scheduler (its
        timesteps modulate the reference tokens, so the KV depends on them)."""
        if self._fingerprint is None:
            scheduler = {k: v for k, v in dict(self.scheduler.config).items() if not k.startswith("_")}
            extra = {**self._fingerprint_extra(), "pipeline": self.pipeline_class,
                     "max_sequence_length": self.max_sequence_length,
                     "vae": model_fingerprint(self.vae, {}), "scheduler": scheduler}
            self._fingerprint = model_fingerprint(self.model, extra)
        return self._fingerprint

    # -- cloud ---------------------------------------------------------------------------
    def template_context(self, template: Template) -> dict[str, np.ndarray]:
        """The template prompt's embeddings: the text encoders run once, in the cloud."""
        return self.prompt_context(template.prompt)

    @property
    def encodes_prompt(self) -> bool:
        return self.pipe is not None

    def prompt_context(self, prompt: str) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            text, pooled = self._encode_prompt(self._cloud("encoding a prompt"), prompt)
        return {PROMPT_EMBEDS: text[0].float().numpy(), POOLED_PROMPT_EMBEDS: pooled[0].float().numpy()}

    def context_limits(self) -> dict[str, tuple[int, ...]]:
        cfg = self.model.config
        return {PROMPT_EMBEDS: (self.text_tokens, cfg.joint_attention_dim),
                POOLED_PROMPT_EMBEDS: (cfg.pooled_projection_dim,)}

    def _encode(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Capture and full take the embeddings through the context objects too, so replay's
        inputs are bit for bit theirs (and text encoders that do not fit the transformer are a
        ModelError)."""
        return self._embeddings(self.prompt_context(prompt))

    def _cloud(self, what: str) -> Any:
        if self.pipe is None:
            raise ModelError(f"{self.name}: {what} needs the whole pipeline (the text encoders); this adapter was "
                             "loaded for the phone")
        return self.pipe

    # -- the template KV on the phone ----------------------------------------------------------
    def template_source(self, template: Template) -> dict[str, np.ndarray]:
        return self.source_from_image(template.image)

    def source_from_image(self, image: np.ndarray) -> dict[str, np.ndarray]:
        """The template latent through this adapter's VAE: what capture computes from the image."""
        latent = self._image_latent(image, template=True)
        return {TEMPLATE_LATENT: latent[0].float().numpy()}

    def source_limits(self) -> dict[str, tuple[int, ...]]:
        return {TEMPLATE_LATENT: self._template_latent_shape()}

    def iter_template_kv(self, source: Mapping[str, np.ndarray], *, context: Mapping[str, np.ndarray], task: str,
                         schedule: Schedule, step: int | None = None) -> Iterator[tuple[ShardKey, KVPair]]:
        """Each step's pass (``step``: that one only): the template latent alone through the blocks
        at the step's timestep under the capture mask, paused after each attention
        (:mod:`~sakura.platform.models._block_stream`). ``context`` holds the template prompt's
        embeddings (its pooled one modulates the reference tokens)."""
        if step is not None and not (type(step) is int and 0 <= step < schedule.steps):
            raise ModelError(f"{self.name}: step {step!r} is not one of the edit's {schedule.steps} steps")
        latent = source_array(source, TEMPLATE_LATENT, self._template_latent_shape())
        cond = self._embeddings(context)
        template = torch.from_numpy(latent.copy())[None].to(self._dtype)
        sigmas = [float(t) / 1000.0 for t in self._scheduler(schedule).timesteps]  # as ``_loop`` hands them
        steps = range(schedule.steps) if step is None else (step,)
        return self._template_kv(template, cond, sigmas, steps)

    def _template_kv(self, template: torch.Tensor, cond: tuple[torch.Tensor, torch.Tensor], sigmas: list[float],
                     steps: Iterator[int] | range | tuple[int, ...]) -> Iterator[tuple[ShardKey, KVPair]]:
        modules = self._attention_modules()
        for step in steps:
            state = RunState(mode=Mode.CAPTURE, template_tokens=self._template_token_count(template), step=step,
                             record_kv={})

            def forward(state: RunState = state, sigma: float = sigmas[step]) -> None:
                with torch.inference_mode(), self._running(state):  # in the worker thread: its own context
                    self._template_forward(template, sigma, cond)

            def read(_: dict[str, Any], __: Any, state: RunState = state) -> tuple[ShardKey, KVPair]:
                assert state.record_kv is not None
                return state.record_kv.popitem()

            blocks = stream_after_modules(modules, forward, read)
            try:
                for layer in range(len(modules)):
                    key, pair = next(blocks)
                    if key != ShardKey(step, layer):
                        raise ModelError(f"{self.name}: the template pass recorded {key} where {step, layer} was due")
                    yield key, pair
            finally:
                blocks.close()

    # -- phone ---------------------------------------------------------------------------
    def replay(self, kv: KVSource, prompt: str, request: EditRequest, schedule: Schedule, *,
               probe: dict[ShardKey, AttentionProbe] | None = None,
               context: Mapping[str, np.ndarray] | None = None) -> torch.Tensor:
        """Request tokens only, attending to cached template KV. ``context`` holds the template
        prompt's embeddings (the phone has no text encoder); without it the cloud encodes ``prompt``."""
        self._check_kv(kv, schedule)
        cond = self._embeddings(context) if context else self._encode(prompt)
        state = RunState(mode=Mode.REPLAY, template_tokens=kv.template_tokens, replay_kv=kv, probe=probe)
        return self._loop(request, schedule, cond, state, None)

    def _denoise(self, request: EditRequest, schedule: Schedule, prompt: str, state: RunState,
                 template: Any | None) -> torch.Tensor:
        """Capture and full: the template's prompt through the text encoders, then the loop."""
        return self._loop(request, schedule, self._encode(prompt), state, template)

    def _loop(self, request: EditRequest, schedule: Schedule, cond: tuple[torch.Tensor, torch.Tensor],
              state: RunState, template: Any | None) -> torch.Tensor:
        """The stock pipelines' loop: the scheduler's timesteps, its ``step``. Both pipelines hand
        the transformer the timestep in the model's dtype (Kontext divided by 1000): passing
        ``t / 1000`` in float64 to the adapters' ``_velocity`` gives exactly those fp32 values."""
        scheduler = self._scheduler(schedule)
        x = self._start(request, scheduler)
        state.template_latent = template
        with torch.inference_mode(), self._running(state):
            for i, t in enumerate(scheduler.timesteps):
                state.step = i
                v = self._velocity(x, float(t) / 1000.0, cond, template)
                x = scheduler.step(v, t, x, return_dict=False)[0]
        return x

    def _embeddings(self, context: Mapping[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """The context objects as the transformer's inputs; any other shape is a ModelError."""
        tensors = []
        for name, shape in self.context_limits().items():
            if name not in context:
                raise ModelError(f"{self.name}: replay needs the template's {name!r} (a context object)")
            array = np.asarray(context[name])
            if array.shape != shape or array.dtype.kind != "f" or not np.isfinite(array).all():
                raise ModelError(f"{self.name}: {name} of shape {array.shape} ({array.dtype}); the model takes "
                                 f"finite floats of shape {shape}")
            tensors.append(torch.from_numpy(np.ascontiguousarray(array, np.float32))[None].to(self._dtype))
        return tensors[0], tensors[1]

    def _scheduler(self, schedule: Schedule) -> Any:
        """A scheduler of this edit's own (they are stateful), set up as the stock pipelines do."""
        scheduler = type(self.scheduler).from_config(self.scheduler.config)
        dynamic = scheduler.config.get("use_dynamic_shifting", False)
        mu = calculate_shift(self._image_tokens(), scheduler.config, self.default_max_shift) if dynamic else None
        scheduler.set_timesteps(sigmas=schedule.pipeline_sigmas(), device=torch.device("cpu"), mu=mu)
        scheduler.set_begin_index(0)
        return scheduler

    def _start(self, request: EditRequest, scheduler: Any) -> torch.Tensor:
        """The user's photo through the VAE, noised to the first sigma (never a reference token)."""
        x0 = self._image_latent(request.image, template=False)
        noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(int(request.seed)), dtype=torch.float32)
        sigma = float(scheduler.sigmas[0])
        return ((1.0 - sigma) * x0.float() + sigma * noise).to(self._dtype)

    # -- parity --------------------------------------------------------------------------
    def stock_image(self, template: Template, request: EditRequest, schedule: Schedule,
                    context: Mapping[str, np.ndarray]) -> np.ndarray:
        """The pipeline's own ``__call__`` on this edit, its transformer under SAKURA's masking:
        what SAKURA's replay must equal."""
        return self._stock(template, request, schedule, context, self._stock_state(template))

    def unmodified_stock_image(self, template: Template, request: EditRequest, schedule: Schedule,
                               context: Mapping[str, np.ndarray]) -> np.ndarray:
        """The pipeline as it ships, on the same inputs."""
        return self._stock(template, request, schedule, context, None)

    def _stock(self, template: Template, request: EditRequest, schedule: Schedule,
               context: Mapping[str, np.ndarray], state: RunState | None) -> np.ndarray:
        pipe = self._cloud("running the stock pipeline")
        text, pooled = self._embeddings(context) if context else self._encode(template.prompt)
        common = dict(prompt_embeds=text, pooled_prompt_embeds=pooled, height=self.resolution, width=self.resolution,
                      num_inference_steps=schedule.steps, sigmas=schedule.pipeline_sigmas(),
                      latents=self._start(request, self._scheduler(schedule)), output_type="np")
        with torch.inference_mode(), self._running(state):
            out = self._call_stock(pipe, template, common)
        return out.images[0].astype(np.float32)
