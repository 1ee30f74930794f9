"""FLUX.2 [klein] KV (``Flux2KleinKVPipeline``) on diffusers' own KV-cache seam.

The model was built for caching: reference tokens self-attend only, under a fixed-timestep
modulation, so their post-RoPE K/V (one :class:`Flux2KVLayerCache` per double- and single-stream
block) depend on neither the step, the prompt nor the user's image: exactly a template KV, one
shard per block. Capture is the stock pipeline's first step (``kv_cache_mode="extract"``) and
keeps that cache; replay runs every step with ``kv_cache_mode="cached"`` and a
:class:`StreamingKVCache` whose layer caches read the shard stream. No attention code is copied:
the transformer's own processors do all of it.

An edit is img2img from the user's photo (VAE-encoded; never a reference token) at the
schedule's strength: the stock schedule ``linspace(1, 1/n, n)`` scaled by the strength, shifted
by the pipeline's own ``compute_empirical_mu``. With the same reference image, prompt embeddings,
initial latents and sigmas the stock pipeline computes the same image (``stock_edit``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

from sakura.platform.errors import ModelError
from sakura.platform.kv import KVPair, KVSource, ShardKey, TemplateKV, dense
from sakura.platform.models._block_stream import stream_after_modules
from sakura.platform.models.base import (
    CaptureResult,
    EditRequest,
    ModelAdapter,
    ModelInfo,
    Schedule,
    Template,
    model_fingerprint,
    source_array,
    to_unit_image,
)
from sakura.platform.models.pipelines import flux2_latents as latents_of

PROMPT_EMBEDS = "prompt_embeds"
#: Source objects: the reference tokens as ``prepare_image_latents`` makes them, and their
#: (T, H, W, L) position ids (small integers, exact in float32: context objects are floats).
REFERENCE_LATENTS, REFERENCE_IDS = "reference_latents", "reference_ids"
MAX_POSITION_ID = 1 << 16


def _stream_caches():
    """The two diffusers classes, subclassed here (imported lazily: diffusers is heavy)."""
    from diffusers.models.transformers.transformer_flux2 import Flux2KVCache, Flux2KVLayerCache

    class StreamingLayerCache(Flux2KVLayerCache):
        """A layer cache filled from a KV source the first time the transformer reads it.

        ``Flux2KVLayerCache`` only holds tensors; its ``get()`` is the one place the transformer
        reads a block's reference K/V, so this is the smallest object to subclass for a stream:
        with the edge client's ``StreamingKV``, ``get()`` waits until that shard is decoded.
        """

        def __init__(self, source: KVSource, key: ShardKey, dtype: torch.dtype) -> None:
            super().__init__()
            self.source, self.key, self.dtype = source, key, dtype

        def get(self) -> tuple[torch.Tensor, torch.Tensor]:
            if self.k_ref is None:
                pair = dense(self.source[self.key])  # diffusers' processors take K and V as they are
                self.store(_to_torch(pair.k, self.dtype), _to_torch(pair.v, self.dtype))
            return super().get()

    class StreamingKVCache(Flux2KVCache):
        """Every block's layer cache reads the source: double blocks are shards 0..D-1, single
        blocks D..D+S-1, the order the transformer runs them."""

        def __init__(self, source: KVSource, num_double: int, num_single: int, dtype: torch.dtype) -> None:
            super().__init__(num_double, num_single)
            self.double_block_caches = [StreamingLayerCache(source, ShardKey(None, i), dtype)
                                        for i in range(num_double)]
            self.single_block_caches = [StreamingLayerCache(source, ShardKey(None, num_double + i), dtype)
                                        for i in range(num_single)]
            self.num_ref_tokens = source.template_tokens

    return StreamingKVCache


def _to_torch(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """(heads, tokens, head_dim) -> diffusers' (batch, tokens, heads, head_dim)."""
    return torch.from_numpy(np.ascontiguousarray(array)).to(dtype).transpose(0, 1).unsqueeze(0)


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """diffusers' (batch, tokens, heads, head_dim) -> (heads, tokens, head_dim); bf16 (which numpy
    lacks) is widened to fp32."""
    heads_first = tensor[0].transpose(0, 1).contiguous()
    return (heads_first.float() if heads_first.dtype == torch.bfloat16 else heads_first).numpy()


class KleinAdapter(ModelAdapter):
    """``pipe`` is the stock pipeline, on the cloud only (it brings the text encoder, whose
    library the phone never imports); the phone runs with the transformer, the VAE and the
    scheduler alone."""

    family = "flux2-klein"
    step_dependent = False
    supports_probe = False
    attends_factored = False
    full_caches_template = True
    computes_template = True
    pipeline_class = "Flux2KleinKVPipeline"
    #: A diffusers transformer: its config and blocks are attributes torch types as ``Tensor | Module``.
    model: Any

    def __init__(self, *, transformer: Any, vae: Any, scheduler: Any, name: str, resolution: int,
                 pipe: Any | None = None, max_sequence_length: int = 512,
                 text_encoder_out_layers: tuple[int, ...] = (9, 18, 27)) -> None:
        from diffusers.pipelines.flux2.image_processor import Flux2ImageProcessor

        self.vae, self.scheduler, self.pipe = vae, scheduler, pipe
        self.vae_scale_factor = 2 ** (len(vae.config.block_out_channels) - 1)
        self.image_processor = Flux2ImageProcessor(vae_scale_factor=self.vae_scale_factor * 2)
        self.max_sequence_length = max_sequence_length
        self.text_encoder_out_layers = tuple(text_encoder_out_layers)
        multiple = self.vae_scale_factor * 2
        if resolution % multiple:
            raise ModelError(f"{name}: resolution {resolution} is not a multiple of {multiple}")
        if pipe is not None:
            pipe.set_progress_bar_config(disable=True)
        super().__init__(transformer, name=name, resolution=resolution)
        self._use_kv_processors()

    def _use_kv_processors(self) -> None:
        """The KV-aware processors the stock pipeline installs (``_set_kv_attn_processors``):
        the transformer's default ones ignore the cache, and the phone has no pipeline to do it."""
        from diffusers.models.transformers.transformer_flux2 import (
            Flux2KVAttnProcessor,
            Flux2KVParallelSelfAttnProcessor,
        )

        for block in self.model.transformer_blocks:
            block.attn.set_processor(Flux2KVAttnProcessor())
        for block in self.model.single_transformer_blocks:
            block.attn.set_processor(Flux2KVParallelSelfAttnProcessor())

    # -- what the model is ---------------------------------------------------------------
    def info(self) -> ModelInfo:
        cfg = self.model.config
        return ModelInfo(name=self.name, family=self.family, layers=cfg.num_layers + cfg.num_single_layers,
                         heads=cfg.num_attention_heads, head_dim=cfg.attention_head_dim, resolution=self.resolution,
                         image_tokens=self._grid() ** 2, text_tokens=self.max_sequence_length, step_dependent=False)

    def _grid(self) -> int:
        return self.resolution // (self.vae_scale_factor * 2)

    @property
    def fingerprint(self) -> str:
        """The transformer, and the VAE that makes reference latents and decodes the result."""
        if self._fingerprint is None:
            vae = model_fingerprint(self.vae, {})
            self._fingerprint = model_fingerprint(self.model, {**self._fingerprint_extra(), "vae": vae,
                                                               "scheduler": dict(self.scheduler.config)})
        return self._fingerprint

    # -- cloud ---------------------------------------------------------------------------
    def template_context(self, template: Template) -> dict[str, np.ndarray]:
        """The template prompt's embeddings: the text encoder runs once, in the cloud."""
        return self.prompt_context(template.prompt)

    @property
    def encodes_prompt(self) -> bool:
        return self.pipe is not None

    def prompt_context(self, prompt: str) -> dict[str, np.ndarray]:
        return {PROMPT_EMBEDS: self._encode_prompt(prompt)}

    def _encode_prompt(self, prompt: str) -> np.ndarray:
        with torch.inference_mode():
            embeds, _ = self._cloud("encoding a prompt").encode_prompt(prompt, device=torch.device("cpu"),
                                                                       max_sequence_length=self.max_sequence_length,
                                                                       text_encoder_out_layers=self.text_encoder_out_layers)
        return embeds[0].float().numpy()

    def context_limits(self) -> dict[str, tuple[int, ...]]:
        return {PROMPT_EMBEDS: (self.max_sequence_length, self.model.config.joint_attention_dim)}

    def capture(self, template: Template, request: EditRequest, schedule: Schedule, *,
                masked: bool = True) -> CaptureResult:
        """The stock first step (``extract``) on the template's reference latents; its cache is the KV."""
        self._masked_only(masked)
        latents, caches = self._run(template, request, schedule, None, {}, keep_cache=True)
        kv = {ShardKey(None, i): KVPair(_to_numpy(c.k_ref), _to_numpy(c.v_ref)) for i, c in enumerate(caches)}
        return CaptureResult(TemplateKV(self.fingerprint, kv), {}, latents)

    def full(self, template: Template, request: EditRequest, schedule: Schedule, *,
             masked: bool = True) -> torch.Tensor:
        self._masked_only(masked)
        return self._run(template, request, schedule, None, {})[0]

    def template_source(self, template: Template) -> dict[str, np.ndarray]:
        """The reference latents and ids, as the stock pipeline prepares them (``prepare_image_latents``)."""
        latents, ids = self.reference_latents(template)
        return {REFERENCE_LATENTS: latents[0].float().numpy(), REFERENCE_IDS: ids[0].float().numpy()}

    def source_from_image(self, image: np.ndarray) -> dict[str, np.ndarray]:
        """:meth:`template_source` with the phone's VAE: ``prepare_image_latents`` for one image
        (mirrored by :mod:`flux2_latents`; the same bits on the same machine, which the tests check)."""
        res = self.resolution
        pixels = self.image_processor.preprocess(self._pil(image), height=res, width=res, resize_mode="crop")
        with torch.inference_mode():
            latents = latents_of.encode_image(self.vae, pixels.to(self.vae.dtype))
        ids = latents_of.reference_ids(latents)
        return {REFERENCE_LATENTS: latents_of.pack(latents)[0].float().numpy(), REFERENCE_IDS: ids[0].float().numpy()}

    def source_limits(self) -> dict[str, tuple[int, ...]]:
        tokens = self._grid() ** 2
        return {REFERENCE_LATENTS: (tokens, self.model.config.in_channels), REFERENCE_IDS: (tokens, 4)}

    # -- phone ---------------------------------------------------------------------------
    def iter_template_kv(self, source: Mapping[str, np.ndarray], *, context: Mapping[str, np.ndarray], task: str,
                         schedule: Schedule, step: int | None = None) -> Iterator[tuple[ShardKey, KVPair]]:
        """The stock ``extract`` forward over the reference tokens alone, paused after each block's
        attention (:mod:`~sakura.platform.models._block_stream`): reference tokens attend only to
        themselves under the fixed-timestep modulation, so their K/V are the capture's bits. The
        text stream is one zero token: nothing of it reaches the reference tokens."""
        self._one_pass(step)
        limits = self.source_limits()
        latents = source_array(source, REFERENCE_LATENTS, limits[REFERENCE_LATENTS])
        ids = source_array(source, REFERENCE_IDS, limits[REFERENCE_IDS])
        if not (np.array_equal(ids, np.round(ids)) and 0 <= ids.min() and ids.max() < MAX_POSITION_ID):
            raise ModelError(f"{self.name}: reference ids must be integers in [0, {MAX_POSITION_ID})")
        keys = self.kv_geometry(schedule.steps).keys
        reference = torch.from_numpy(latents.copy())[None].to(self._dtype)
        return self._template_kv(reference, torch.from_numpy(ids.astype(np.int64))[None], keys)

    def _template_kv(self, reference: torch.Tensor, ids: torch.Tensor,
                     keys: tuple[ShardKey, ...]) -> Iterator[tuple[ShardKey, KVPair]]:
        text = torch.zeros(1, 1, self.model.config.joint_attention_dim, dtype=self._dtype)

        def forward() -> None:
            with torch.inference_mode():
                self.model(hidden_states=reference, img_ids=ids, timestep=torch.zeros(1, dtype=self._dtype),
                           guidance=None, encoder_hidden_states=text, txt_ids=latents_of.text_ids(text),
                           kv_cache_mode="extract", num_ref_tokens=reference.shape[1], return_dict=False)

        def read(kwargs: dict[str, Any], _: Any) -> KVPair:
            return KVPair(_to_numpy(kwargs["kv_cache"].k_ref), _to_numpy(kwargs["kv_cache"].v_ref))

        attention = [b.attn for b in [*self.model.transformer_blocks, *self.model.single_transformer_blocks]]
        blocks = stream_after_modules(attention, forward, read)
        try:
            for key in keys:
                yield key, next(blocks)
        finally:
            blocks.close()

    def replay(self, kv: KVSource, prompt: str, request: EditRequest, schedule: Schedule, *,
               probe: Any = None, context: Mapping[str, np.ndarray] | None = None) -> torch.Tensor:
        self._check_kv(kv, schedule)
        if probe is not None:
            raise ModelError(f"{self.name}: attention probes are not available on diffusers' KV seam")
        cfg = self.model.config
        cache = _stream_caches()(kv, cfg.num_layers, cfg.num_single_layers, self._dtype)
        return self._run(None, request, schedule, cache, dict(context or {}), prompt=prompt)[0]

    def stock_image(self, template: Template, request: EditRequest, schedule: Schedule,
                    context: Mapping[str, np.ndarray]) -> np.ndarray:
        """The unmodified ``Flux2KleinKVPipeline`` on this edit: the same reference image, prompt
        embeddings, initial latents and sigmas (what SAKURA's edit must equal)."""
        embeds = self._prompt_embeds(template.prompt, context)
        with torch.inference_mode():
            out = self._cloud("running the stock pipeline")(
                image=self.reference_image(template), prompt_embeds=embeds, height=self.resolution,
                width=self.resolution, num_inference_steps=schedule.steps, sigmas=schedule.pipeline_sigmas(),
                latents=self.unpacked_initial_latents(request, schedule), output_type="np")
        return out.images[0].astype(np.float32)

    def latent_to_image(self, latent: torch.Tensor) -> np.ndarray:
        ids = latents_of.latent_ids(torch.zeros(1, 1, self._grid(), self._grid()))
        with torch.inference_mode():
            decoded = latents_of.decode_latents(self.vae, latent.to(self.vae.dtype), ids)
        return self.image_processor.postprocess(decoded, output_type="np")[0].astype(np.float32)

    # -- the loop ------------------------------------------------------------------------
    def _run(self, template: Template | None, request: EditRequest, schedule: Schedule, cache: Any,
             context: dict[str, np.ndarray], *, prompt: str | None = None,
             keep_cache: bool = False) -> tuple[torch.Tensor, list[Any]]:
        """The stock denoising loop: step 0 ``extract`` with the reference tokens when a template
        is given (then ``cached`` with that cache), else every step ``cached`` from ``cache``."""
        dtype = self._dtype
        embeds = self._prompt_embeds(template.prompt if template is not None else prompt, context)
        text_ids = latents_of.text_ids(embeds)
        scheduler, sigmas = self._scheduler(schedule)
        latents, latent_ids = self.initial_latents(request, scheduler)
        reference = self.reference_latents(template) if template is not None else None
        extracted: Any = None  # the Flux2KVCache step 0 extracts, with a template
        with torch.inference_mode():
            for i, t in enumerate(scheduler.timesteps):
                timestep = (t.expand(1) / 1000).to(dtype)
                common = dict(timestep=timestep, guidance=None, encoder_hidden_states=embeds, txt_ids=text_ids,
                              return_dict=False)
                if i == 0 and reference is not None:
                    ref_latents, ref_ids = reference
                    noise_pred, extracted = self.model(hidden_states=torch.cat([ref_latents, latents], dim=1).to(dtype),
                                                       img_ids=torch.cat([ref_ids, latent_ids], dim=1),
                                                       kv_cache_mode="extract", num_ref_tokens=ref_latents.shape[1],
                                                       **common)
                    cache = extracted
                else:
                    noise_pred = self.model(hidden_states=latents.to(dtype), img_ids=latent_ids, kv_cache=cache,
                                            kv_cache_mode="cached", **common)[0]
                latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
        caches = list(extracted.double_block_caches) + list(extracted.single_block_caches) if keep_cache else []
        return latents, caches

    def _prompt_embeds(self, prompt: str | None, context: Mapping[str, np.ndarray]) -> torch.Tensor:
        if PROMPT_EMBEDS in context:
            embeds = np.asarray(context[PROMPT_EMBEDS], dtype=np.float32)
            longest, width = self.context_limits()[PROMPT_EMBEDS]
            if embeds.ndim != 2 or embeds.shape[1] != width or not 1 <= embeds.shape[0] <= longest:
                raise ModelError(f"{self.name}: prompt embeddings of shape {embeds.shape}; the model takes "
                                 f"(1..{longest}, {width})")
        else:
            embeds = self._encode_prompt(prompt or "")
        return torch.from_numpy(embeds)[None].to(self._dtype)

    def _scheduler(self, schedule: Schedule) -> tuple[Any, list[float]]:
        """A scheduler of this edit's own (they are stateful), set up as the stock pipeline does."""
        scheduler = type(self.scheduler).from_config(self.scheduler.config)
        sigmas = schedule.pipeline_sigmas()
        mu = latents_of.empirical_mu(image_seq_len=self._grid() ** 2, num_steps=schedule.steps)
        scheduler.set_timesteps(sigmas=sigmas, device=torch.device("cpu"), mu=mu)
        scheduler.set_begin_index(0)
        return scheduler, sigmas

    def initial_latents(self, request: EditRequest, scheduler: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The user's photo through the VAE, noised to the schedule's first sigma (packed, with ids)."""
        photo = torch.from_numpy(to_unit_image(request.image)).permute(2, 0, 1)[None] * 2.0 - 1.0
        if photo.shape[-2:] != (self.resolution, self.resolution):
            raise ModelError(f"{self.name}: the photo is {tuple(photo.shape[-2:])}, the model edits at "
                             f"{self.resolution}x{self.resolution}")
        with torch.inference_mode():
            x0 = latents_of.encode_image(self.vae, photo.to(self.vae.dtype))
        noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(int(request.seed)), dtype=torch.float32)
        sigma = float(scheduler.sigmas[0])
        start = ((1.0 - sigma) * x0.float() + sigma * noise).to(self._dtype)
        return latents_of.pack(start), latents_of.latent_ids(start)

    def unpacked_initial_latents(self, request: EditRequest, schedule: Schedule) -> torch.Tensor:
        """The initial latents in the stock pipeline's ``latents=`` layout (batch, channels, h, w)."""
        scheduler, _ = self._scheduler(schedule)
        latents, ids = self.initial_latents(request, scheduler)
        return latents_of.unpack(latents, ids)

    def reference_image(self, template: Template) -> Any:
        """The template's image as the PIL image the stock pipeline would be handed."""
        return self._pil(template.image)

    def _pil(self, image: np.ndarray) -> Any:
        from PIL import Image

        pixels = (np.clip(to_unit_image(image), 0.0, 1.0) * 255.0).round().astype(np.uint8)
        if pixels.shape[:2] != (self.resolution, self.resolution):
            raise ModelError(f"{self.name}: the reference image is {pixels.shape[1]}x{pixels.shape[0]}, the model "
                             f"takes {self.resolution}x{self.resolution}")
        return Image.fromarray(pixels)

    def reference_latents(self, template: Template) -> tuple[torch.Tensor, torch.Tensor]:
        """The template's reference tokens, as the stock pipeline prepares them (cloud only)."""
        pipe, res = self._cloud("preparing reference latents"), self.resolution
        image = self.image_processor.preprocess(self.reference_image(template), height=res, width=res,
                                                resize_mode="crop")
        with torch.inference_mode():
            return pipe.prepare_image_latents(images=[image], batch_size=1, generator=None,
                                              device=torch.device("cpu"), dtype=self.vae.dtype)

    def _cloud(self, what: str) -> Any:
        if self.pipe is None:
            raise ModelError(f"{self.name}: {what} needs the whole pipeline (the text encoder); this adapter was "
                             "loaded for the phone")
        return self.pipe

    @property
    def _dtype(self) -> torch.dtype:
        return self.model.dtype

    def _masked_only(self, masked: bool) -> None:
        if not masked:
            raise ModelError(f"{self.name}: FLUX.2 klein's reference tokens always attend only to themselves")

    def _fingerprint_extra(self) -> dict[str, Any]:
        return {**super()._fingerprint_extra(), "max_sequence_length": self.max_sequence_length}
