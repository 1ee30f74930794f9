"""The client an app embeds: ``EdgeSession(server_url).edit(image, template)``.

It fetches the template's manifest, checks it was built for the model on this device and that
everything in it fits that model (:mod:`~sakura.edge_client.validation`), and runs the model's
replay path while the pipeline streams shards in at the levels the policy picks. Only template
id, version, shard index and level leave the device: the photo never does.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from sakura.edge_client.cache import ShardCache
from sakura.edge_client.compute_model import ComputeModel
from sakura.edge_client.estimator import BandwidthEstimator
from sakura.edge_client.fetcher import ShardFetcher
from sakura.edge_client.link import Link
from sakura.edge_client.pipeline import Device, EditPipeline
from sakura.edge_client.planning import COMPUTE
from sakura.edge_client.policy import LevelPolicy, make_policy
from sakura.edge_client.template_kv import TemplateComputer
from sakura.edge_client.timeline import Timeline
from sakura.edge_client.transport import MIN_USEFUL_RATE, HttpTransport, RetryPolicy
from sakura.edge_client.urls import UrlPolicy
from sakura.edge_client.validation import MAX_EDIT_STEPS, accept_manifest, check_request
from sakura.platform import http_api, layout
from sakura.platform.context import decode_context
from sakura.platform.errors import ModelError
from sakura.platform.ids import validate_template_id
from sakura.platform.images import fit_image
from sakura.platform.manifest import MAX_MANIFEST_BYTES, ContextEntry, Manifest, ManifestError, ModelRef
from sakura.platform.models import EditRequest, ModelAdapter, Schedule, load_named_model

DEFAULT_CACHE_BUDGET = 256 << 20


@dataclass(frozen=True)
class EditResult:
    image: np.ndarray  # HxWx3 floats in [0, 1]
    timeline: Timeline
    levels: list[str]  # per shard, in consumption order: the level fetched, or "compute"
    bytes: int  # fetched over the network
    latency_s: float  # from the call to the finished image
    template: str
    version: int

    @property
    def computed(self) -> list[int]:
        """The shards the phone computed itself instead of fetching."""
        return [i for i, level in enumerate(self.levels) if level == COMPUTE]


class EdgeSession:
    def __init__(
        self,
        server_url: str,
        *,
        cache_dir: str | Path | None = None,
        cache_budget_bytes: int = DEFAULT_CACHE_BUDGET,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        link: Link | None = None,
        models: Callable[[str], ModelAdapter] = load_named_model,
        device: Device | None = None,
        urls: UrlPolicy = UrlPolicy(),
        min_rate_bytes_per_s: float = MIN_USEFUL_RATE,
        max_steps: int = MAX_EDIT_STEPS,
    ) -> None:
        """``models`` maps the model name a manifest names to this device's model; the default
        loads named models only (a name from the network never becomes a path). ``urls`` says
        which servers and redirect targets the client talks to; ``timeout_s`` bounds each network
        wait and, with ``min_rate_bytes_per_s``, every download; ``max_steps`` bounds the model passes
        a template may ask of this device (see the README's security model)."""
        self.transport = HttpTransport(server_url, api_key=api_key, timeout_s=timeout_s, retry=retry, link=link,
                                       urls=urls, min_rate_bytes_per_s=min_rate_bytes_per_s)
        self.cache = ShardCache(cache_dir, cache_budget_bytes) if cache_dir is not None else None
        self.estimator = BandwidthEstimator()
        self.compute_model = ComputeModel()
        self.device = device
        self.max_steps = max_steps
        self._load_model = models
        self._models: dict[str, ModelAdapter] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> "EdgeSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()
        if self.cache is not None:
            self.cache.close()

    # -- manifests -----------------------------------------------------------------------
    def manifest(self, template: str, version: int | str = "latest", *, cancel: threading.Event | None = None) -> Manifest:
        """The manifest of ``template`` at a version number or alias (numeric ones come from the cache)."""
        validate_template_id(template)
        number = layout.version_ref(version)
        version = str(number) if number is not None else version
        if number is not None and self.cache is not None:
            cached = self.cache.read_manifest(template, number)
            if cached is not None:
                try:
                    manifest = Manifest.from_bytes(cached)
                    check_request(manifest, template, number)
                    return manifest
                except ManifestError:
                    pass  # written by an older client, or damaged: fetch it again
        body = self.transport.get(http_api.manifest_path(template, version), cancel=cancel, limit=MAX_MANIFEST_BYTES).body
        manifest = Manifest.from_bytes(body)
        check_request(manifest, template, number)
        if self.cache is not None:
            self.cache.write_manifest(template, manifest.version, body)
        return manifest

    def context(self, manifest: Manifest, *, cancel: threading.Event | None = None) -> dict[str, np.ndarray]:
        """The template's context objects (e.g. prompt embeddings), verified and decoded; the
        manifest was checked against the model first, so their shapes are ones it takes."""
        return self._objects(manifest, manifest.context, http_api.context_path, cancel)

    def source(self, manifest: Manifest, *, cancel: threading.Event | None = None) -> dict[str, np.ndarray]:
        """What the model computes the template KV from (``ModelAdapter.template_source``),
        verified and decoded like :meth:`context`; the manifest was checked against the model first."""
        return self._objects(manifest, manifest.source, http_api.source_path, cancel)

    def _objects(self, manifest: Manifest, entries: list[ContextEntry], path_of: Callable[[str, int, str], str],
                 cancel: threading.Event | None) -> dict[str, np.ndarray]:
        out = {}
        for entry in entries:
            path = path_of(manifest.template_id, manifest.version, entry.name)
            got = self.transport.download(path, sha256=entry.sha256, length=entry.length, cancel=cancel)
            # the same link as the shards: a phone that computed everything last time still learns its rate
            busy = max(got.arrived_at - got.first_byte_at, got.arrived_at - got.requested_at - self.estimator.rtt_s)
            self.estimator.observe(len(got.data), max(busy, 1e-6))
            out[entry.name] = decode_context(got.data, tuple(entry.shape), entry.dtype)
        return out

    def model_for(self, ref: ModelRef) -> ModelAdapter:
        """The on-device model a manifest was built for; refuses a template built for another model."""
        with self._lock:
            adapter = self._models.get(ref.name)
            if adapter is None:
                adapter = self._models[ref.name] = self._load_model(ref.name)
        if adapter.fingerprint != ref.fingerprint:
            raise ModelError(f"template was built for model {ref.name} {ref.fingerprint[:12]}; "
                             f"this device has {adapter.fingerprint[:12]}")
        return adapter

    # -- editing -------------------------------------------------------------------------
    def edit(
        self,
        image: np.ndarray,
        template: str,
        version: int | str = "latest",
        policy: str | LevelPolicy = "hybrid",
        *,
        seed: int = 0,
        cancel: threading.Event | None = None,
    ) -> EditResult:
        """Edit ``image`` (HxWx3, uint8 or floats in [0, 1]) with a template from the server."""
        origin = time.monotonic()
        clock = lambda: time.monotonic() - origin  # noqa: E731
        chosen = make_policy(policy) if isinstance(policy, str) else policy
        manifest = self.manifest(template, version, cancel=cancel)
        adapter = self.model_for(manifest.model)
        limits = accept_manifest(manifest, adapter, max_steps=self.max_steps)
        context = self.context(manifest, cancel=cancel)
        request = EditRequest(fit_image(np.asarray(image), adapter.resolution), seed=seed)
        schedule = Schedule(manifest.schedule.steps, manifest.schedule.strength)
        if self.cache is not None:
            self.cache.touch(template)
        fetcher = ShardFetcher(self.transport, manifest, self.estimator, self.cache, clock)
        template_kv = self._template_computer(chosen, adapter, manifest, context, schedule, cancel)
        pipeline = EditPipeline(manifest, fetcher, chosen, self.estimator, self.compute_model,
                                limits=limits, clock=clock, cancel=cancel, device=self.device, template=template_kv)
        pipeline.timeline.manifest_s = clock()
        try:
            latent = pipeline.run(lambda kv: adapter.replay(kv, manifest.prompt, request, schedule, context=context))
        finally:
            if template_kv is not None:
                template_kv.close()
        result = adapter.latent_to_image(latent)
        timeline = pipeline.timeline
        timeline.compute_end = clock()
        return EditResult(result, timeline, timeline.levels, timeline.network_bytes, clock(), template, manifest.version)

    def _template_computer(self, policy: LevelPolicy, adapter: ModelAdapter, manifest: Manifest,
                           context: dict[str, np.ndarray], schedule: Schedule,
                           cancel: threading.Event | None) -> TemplateComputer | None:
        """The phone's own template KV, when the policy may compute and the model and template allow."""
        if not (getattr(policy, "computes", False) and adapter.computes_template and manifest.source):
            return None
        source = self.source(manifest, cancel=cancel)
        blocks = adapter.iter_template_kv(source, context=context, task=manifest.task, schedule=schedule)
        return TemplateComputer(blocks, [s.key for s in manifest.shards], self.compute_model, manifest.model.name,
                                pace=self.device.after_template if self.device is not None else None)

