"""The client an app embeds: ``EdgeSession(server_url).edit(image, template)``.

It fetches the template's manifest, checks it was built for the model on this device and that
everything in it fits that model (:mod:`~sakura.edge_client._validation`), takes the objects an
edit needs besides the shards (:mod:`~sakura.edge_client._objects`), and runs the model's replay
path while the pipeline streams shards in at the levels the policy picks. Only template
id, version, shard index and level leave the device: the photo never does.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from sakura.edge_client._cache import ShardCache
from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client._fetcher import ShardFetcher
from sakura.edge_client._first_shard import FirstShard
from sakura.edge_client._http.transport import MIN_USEFUL_RATE, HttpTransport
from sakura.edge_client._http.urls import UrlPolicy
from sakura.edge_client._link_meter import LinkMeter
from sakura.edge_client._models import ModelLoads
from sakura.edge_client._objects import VersionObjects
from sakura.edge_client._pipeline import EditPipeline
from sakura.edge_client._result import EditResult
from sakura.edge_client._shard_hashes import ShardHashes
from sakura.edge_client._template_kv import TemplateComputer
from sakura.edge_client._validation import MAX_EDIT_STEPS, accept_manifest, check_request
from sakura.edge_client.device import Device
from sakura.edge_client.errors import EditCancelled, WrongModel, raises_edge_errors
from sakura.edge_client.estimator import BandwidthEstimator
from sakura.edge_client.link import Link
from sakura.edge_client.policy import LevelPolicy, asks_first_shard, make_policy
from sakura.edge_client.timeline import Progress
from sakura.platform import http_api, layout
from sakura.platform.ids import validate_template_id
from sakura.platform.images import fit_image
from sakura.platform.kv import KVPair, ShardKey
from sakura.platform.manifest import MAX_MANIFEST_BYTES, ManifestError, PhoneManifest, PhoneModel
from sakura.platform.models import EditRequest, ModelAdapter, Schedule, load_named_model
from sakura.platform.retry import RetryPolicy

DEFAULT_CACHE_BUDGET = 256 << 20


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
        encode_prompts: bool = False,
    ) -> None:
        """``models`` maps the model name a manifest names to this device's model; the default
        loads named models only (a name from the network never becomes a path). ``urls`` says
        which servers and redirect targets the client talks to; ``timeout_s`` bounds each network
        wait and, with ``min_rate_bytes_per_s``, every download; ``max_steps`` bounds the model passes
        a template may ask of this device (see the README's security model). ``encode_prompts``:
        this device's models hold their text encoders (``models`` loads whole pipelines, as the
        stock on-device pipeline does), so a template's prompt embeddings are encoded here from its
        prompt rather than fetched, unless the timing model knows fetching them is sooner
        (:func:`~sakura.edge_client.planning.encode_on_phone`)."""
        self.transport = HttpTransport(server_url, api_key=api_key, timeout_s=timeout_s, retry=retry, link=link,
                                       urls=urls, min_rate_bytes_per_s=min_rate_bytes_per_s)
        self.cache = ShardCache(cache_dir, cache_budget_bytes) if cache_dir is not None else None
        self.estimator = BandwidthEstimator()
        self.meter = LinkMeter(self.estimator)  # the one owner of link measurement (it feeds the estimator)
        self.compute_model = ComputeModel()
        self.device = device
        self.max_steps = max_steps
        self.encode_prompts = encode_prompts
        self._models = ModelLoads(models)
        self._objects = VersionObjects(self)  # the version's objects, through this session's link and cache

    def __enter__(self) -> EdgeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()
        if self.cache is not None:
            self.cache.close()

    # -- manifests -----------------------------------------------------------------------
    @raises_edge_errors
    def manifest(self, template: str, version: int | str = "latest", *,
                 cancel: threading.Event | None = None) -> PhoneManifest:
        """The manifest of ``template`` at a version number or alias (numeric ones come from the cache)."""
        validate_template_id(template)
        number = layout.version_ref(version)
        version = str(number) if number is not None else version
        if number is not None and self.cache is not None:
            cached = self.cache.read_manifest(template, number)
            if cached is not None:
                try:
                    manifest = PhoneManifest.from_wire(cached)
                    check_request(manifest, template, number)
                    return manifest
                except ManifestError:
                    pass  # written by an older client, or damaged: fetch it again
        body = self.transport.get(http_api.manifest_path(template, version), {"Accept-Encoding": "zstd"},
                                  cancel=cancel, limit=MAX_MANIFEST_BYTES).body
        manifest = PhoneManifest.from_wire(body)
        check_request(manifest, template, number)
        if self.cache is not None:
            self.cache.write_manifest(template, manifest.version, body)
        return manifest

    @raises_edge_errors
    def preamble(self, template: str, version: int | str = "latest", *, source: bool = False, context: bool = True,
                 images: bool = False, hashes: bool = True,
                 cancel: threading.Event | None = None) -> tuple[PhoneManifest, dict[str, bytes]]:
        """The manifest and the encoded context (unless not ``context``) and source (with
        ``source``) objects and images (with ``images``) the server bundled with it, in one round
        trip (:data:`~sakura.platform.http_api.PREAMBLE`); the objects are still unverified
        (:meth:`context` and :meth:`source` check them). Without ``hashes`` the manifest may come
        without its shards' sha256s (:meth:`shard_hashes` has them). A manifest this phone has
        cached comes without a request, and without objects."""
        number = self._cached_version(template, version)
        if number is not None:
            return self.manifest(template, number, cancel=cancel), {}
        number = layout.version_ref(version)
        started = time.monotonic()
        path = http_api.preamble_path(template, number if number is not None else version, source=source,
                                      context=context, images=images, hashes=hashes)
        reply = self.transport.get(path, cancel=cancel, limit=MAX_MANIFEST_BYTES + http_api.MAX_BUNDLED_BYTES)
        if reply.first_byte_at is not None:  # the round trip the shard requests will lead by
            self.meter.round_trip(reply.first_byte_at - started)
        head = _manifest_length(reply.headers.get(http_api.PREAMBLE_MANIFEST_LENGTH.lower()), len(reply.body))
        manifest = PhoneManifest.from_wire(reply.body[:head])
        check_request(manifest, template, number)
        if self.cache is not None:
            self.cache.write_manifest(template, manifest.version, reply.body[:head])
        if reply.headers.get(http_api.PREAMBLE_BUNDLED.lower()) != "1":
            return manifest, {}
        objects = _split_objects(manifest, reply.body[head:], source, context, images)
        if objects:  # the same link as the shards (as when the objects came one by one)
            self.meter.response(len(reply.body), first_byte_at=reply.first_byte_at, arrived_at=time.monotonic(),
                                requested_at=started, counted=False)
        return manifest, objects

    @raises_edge_errors
    def context(self, manifest: PhoneManifest, *, cancel: threading.Event | None = None,
                bundled: dict[str, bytes] | None = None) -> dict[str, np.ndarray]:
        """The template's context objects (e.g. prompt embeddings), verified and decoded; the
        manifest was checked against the model first, so their shapes are ones it takes.
        ``bundled``: encoded objects that came with the manifest (:meth:`preamble`)."""
        return self._objects.decoded(manifest, "context", http_api.context_path, cancel, bundled or {})

    @raises_edge_errors
    def source(self, manifest: PhoneManifest, *, cancel: threading.Event | None = None,
               bundled: dict[str, bytes] | None = None) -> dict[str, np.ndarray]:
        """What the model computes the template KV from (``ModelAdapter.template_source``),
        verified and decoded like :meth:`context`; the manifest was checked against the model first."""
        return self._objects.decoded(manifest, "source", http_api.source_path, cancel, bundled or {})

    def shard_hashes(self, manifest: PhoneManifest, cancel: threading.Event | None = None) -> ShardHashes:
        """Where ``manifest``'s shards' sha256s come from: the manifest, else its shard hashes object,
        kept on the phone or fetched the first time a shard needs its sha256 (and kept)."""
        return self._objects.shard_hashes(manifest, cancel)

    @raises_edge_errors
    def model_for(self, ref: PhoneModel, *, cancel: threading.Event | None = None) -> ModelAdapter:
        """The on-device model a manifest was built for, loaded once per session (on a thread of
        its own: a ``cancel`` set while it loads returns at once, and the load goes on for the
        next edit); refuses a template built for another model."""
        adapter = self._models.get(ref.name, cancel)
        if adapter.fingerprint != ref.fingerprint:
            raise WrongModel(f"template was built for model {ref.name} {ref.fingerprint[:12]}; "
                             f"this device has {adapter.fingerprint[:12]}")
        return adapter

    # -- editing -------------------------------------------------------------------------
    @raises_edge_errors
    def edit(
        self,
        image: np.ndarray,
        template: str,
        version: int | str = "latest",
        policy: str | LevelPolicy = "hybrid",
        *,
        seed: int = 0,
        cancel: threading.Event | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> EditResult:
        """Edit a photo with a template from the server.

        :param image: the photo, ``(H, W, 3)`` RGB, uint8 or floats in [0, 1], any size: it is
            centre-cropped to a square and resized to the model's resolution.
        :param template: the template's id.
        :param version: a version number, or an alias the server resolves (``"latest"``).
        :param policy: how each shard's level is chosen (:func:`~sakura.edge_client.policy.policy_names`),
            or a :class:`~sakura.edge_client.policy.LevelPolicy`.
        :param seed: the seed of the edit's noise: the same photo, template and seed give the same image.
        :param cancel: set it, from any thread, to stop the edit: it raises
            :class:`~sakura.edge_client.errors.EditCancelled` within a poll (tens of
            milliseconds) wherever it is waiting (the network, the first edit's model load, which
            goes on in the background for the next edit, a shard), or once the model's current
            layer (or the template block it computes) is done. Encoding a prompt on the phone
            (``encode_prompts``) and turning the final latent into the image are not interrupted.
        :param on_progress: called with a :class:`~sakura.edge_client.timeline.Progress` each
            time a shard is fetched, decoded or computed. It runs on the pipeline's threads (a
            download's, the decoder's, or the caller's own for a computed shard), one call at a
            time and never after ``edit`` has returned or raised, so it should be quick (hand the
            event to the UI thread). If it raises, the edit stops as on any failure (downloads
            aborted, nothing left half done: the session and its cache stay usable) and ``edit``
            raises that exception.
        :returns: the image and how the edit went.
        :raises EdgeError: every failure of the edit (see :mod:`sakura.edge_client.errors`),
            except what ``on_progress`` raised, which is raised as it is.
        """
        origin = time.monotonic()
        clock = lambda: time.monotonic() - origin  # noqa: E731
        chosen = make_policy(policy) if isinstance(policy, str) else policy
        first = self._first_shard(chosen, template, version)
        try:
            computes = getattr(chosen, "computes", False)
            manifest, bundled = self.preamble(template, version, images=computes, context=not self.encode_prompts,
                                              hashes=not computes, cancel=cancel)
            preamble_s = clock()
            adapter = self.model_for(manifest.model, cancel=cancel)
            model_load_s = clock() - preamble_s
            limits = accept_manifest(manifest, adapter, max_steps=self.max_steps)
            context, encode_s = self._objects.edit_context(manifest, adapter, cancel, bundled)
            if cancel is not None and cancel.is_set():  # after a prompt encoded here
                raise EditCancelled("the edit was cancelled")
            request = EditRequest(fit_image(np.asarray(image), adapter.resolution), seed=seed)
            schedule = Schedule(manifest.schedule.steps, manifest.schedule.strength)
            if self.cache is not None:
                self.cache.touch(template)
            fetcher = ShardFetcher(self.transport, manifest, self.meter, self.cache, clock, first,
                                   self.shard_hashes(manifest, cancel))
            template_kv = self._template_computer(chosen, adapter, manifest, context, schedule, cancel, bundled)
            pipeline = EditPipeline(manifest, fetcher, chosen, self.estimator, self.compute_model,
                                    limits=limits, clock=clock, cancel=cancel, device=self.device, template=template_kv,
                                    factored=adapter.attends_factored, on_progress=on_progress)
            pipeline.timeline.manifest_s, pipeline.timeline.preamble_s = clock(), preamble_s
            pipeline.timeline.model_load_s, pipeline.timeline.precompute_s = model_load_s, encode_s
            try:
                latent = pipeline.run(
                    lambda kv: adapter.replay(kv, manifest.prompt, request, schedule, context=context))
            finally:
                if template_kv is not None:
                    template_kv.close()
        finally:
            if first is not None:
                first.close()
        result = np.asarray(adapter.latent_to_image(latent), dtype=np.float32)  # what EditResult.image says
        timeline = pipeline.timeline
        timeline.compute_end = clock()
        return EditResult(result, timeline, timeline.levels, timeline.network_bytes, clock(), template,
                          manifest.version)

    def _first_shard(self, policy: LevelPolicy, template: str, version: int | str) -> FirstShard | None:
        """Shard 0 asked for with the preamble: by an adaptive fetching policy (it starts at the
        smallest level while no rate is known) in a session that knows no rate yet."""
        if not asks_first_shard(policy, self.estimator.estimate()):
            return None
        if self._cached_version(template, version) is not None:
            return None  # no preamble to overlap
        number = layout.version_ref(version)
        return FirstShard(self.transport, template, number if number is not None else version)

    def _cached_version(self, template: str, version: int | str) -> int | None:
        """The version number when this phone has its manifest cached (only numeric versions are)."""
        validate_template_id(template)
        number = layout.version_ref(version)
        if number is None or self.cache is None or self.cache.read_manifest(template, number) is None:
            return None
        return number

    def _template_computer(self, policy: LevelPolicy, adapter: ModelAdapter, manifest: PhoneManifest,
                           context: dict[str, np.ndarray], schedule: Schedule, cancel: threading.Event | None,
                           bundled: dict[str, bytes]) -> TemplateComputer | None:
        """The phone's own template KV, when the policy may compute and the model and template allow."""
        if not (getattr(policy, "computes", False) and adapter.computes_template
                and (manifest.source or manifest.images)):
            return None
        make_source, prepare_s = self._objects.template_source(manifest, adapter, cancel, bundled)
        source = functools.cache(make_source)  # once, for every pass

        def blocks(step: int | None) -> Iterator[tuple[ShardKey, KVPair]]:
            return adapter.iter_template_kv(source(), context=context, task=manifest.task, schedule=schedule,
                                            step=step)

        return TemplateComputer(blocks, [s.key for s in manifest.shards], self.compute_model, manifest.model.name,
                                pace=self.device.after_template if self.device is not None else None,
                                prepare_s=prepare_s, cancel=cancel)



def _manifest_length(header: str | None, body_length: int) -> int:
    """The manifest's length in a preamble response, checked against the body and the manifest limit."""
    length = layout.parse_number(header, max_digits=9)  # not str.isdigit(): it takes a superscript 2, int() not
    if length is None:
        raise ManifestError(f"preamble response without a valid {http_api.PREAMBLE_MANIFEST_LENGTH} header")
    if not 0 < length <= min(body_length, MAX_MANIFEST_BYTES):
        raise ManifestError(f"preamble response claims a {length}-byte manifest in a {body_length}-byte body")
    return length


def _split_objects(manifest: PhoneManifest, rest: bytes, source: bool, context: bool,
                   images: bool) -> dict[str, bytes]:
    """The bundled objects as ``kind/name`` (images are source objects), sliced by the manifest's
    lengths; the bytes must add up exactly."""
    entries = manifest.bundle(context=context, source=source, images=images)
    listed = sum(e.length for _, e in entries)
    if listed != len(rest):
        raise ManifestError(f"preamble response carries {len(rest)} bytes of objects; the manifest lists {listed}")
    out, offset = {}, 0
    for kind, entry in entries:
        out[f"{kind}/{entry.name}"] = rest[offset:offset + entry.length]
        offset += entry.length
    return out
