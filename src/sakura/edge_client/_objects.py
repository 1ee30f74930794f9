"""A template version's objects on the phone: what an edit needs of it besides the shards.

The context objects (e.g. prompt embeddings) and source objects (what the model computes the
template KV from) a manifest lists, the template's image and the shard hashes object: each
verified against its sha256, taken kept on the phone, bundled with the manifest, else downloaded
(and kept). And what the phone makes itself and keeps under names of its own (no adapter's
object's): the source from the template's image, the context from its prompt.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from sakura.edge_client._cache import ShardCache
from sakura.edge_client._compute_model import PROMPT, SOURCE, ComputeModel
from sakura.edge_client._http.transport import HttpTransport
from sakura.edge_client._link_meter import LinkMeter
from sakura.edge_client._shard_hashes import ShardHashes
from sakura.edge_client._validation import made_fits
from sakura.edge_client.estimator import BandwidthEstimator
from sakura.edge_client.planning import encode_on_phone
from sakura.platform import http_api
from sakura.platform.context import decode_context
from sakura.platform.manifest import PhoneHashes, PhoneImage, PhoneManifest, PhoneObject
from sakura.platform.models import ModelAdapter
from sakura.platform.template_image import TEMPLATE_IMAGE, decode_published

#: The names the phone keeps what it made itself for a version under (no adapter's object's): the
#: source from the template's image, the context objects from its prompt.
MADE_SOURCE, MADE_CONTEXT = "made_source", "made_context"
#: The name the phone keeps a version's shard hashes object under (``PhoneManifest.shard_hashes``).
SHARD_HASHES = "shard_hashes"


class Session(Protocol):
    """What the objects need of the session that holds them
    (:class:`~sakura.edge_client._session.EdgeSession`), read each time they are used."""

    transport: HttpTransport
    cache: ShardCache | None
    meter: LinkMeter
    estimator: BandwidthEstimator
    compute_model: ComputeModel
    encode_prompts: bool


class VersionObjects:
    """A session's way to a template version's objects: kept, bundled, downloaded, or made here."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def decoded(self, manifest: PhoneManifest, kind: str, path_of: Callable[[str, int, str], str],
                cancel: threading.Event | None, bundled: dict[str, bytes]) -> dict[str, np.ndarray]:
        """The ``kind`` (``"context"`` or ``"source"``) objects of ``manifest``, verified and decoded."""
        return {entry.name: decode_context(self._bytes(manifest, kind, entry, path_of, cancel, bundled),
                                           tuple(entry.shape), entry.dtype, entry.encoding)
                for entry in getattr(manifest, kind)}

    def edit_context(self, manifest: PhoneManifest, adapter: ModelAdapter, cancel: threading.Event | None,
                     bundled: dict[str, bytes]) -> tuple[dict[str, np.ndarray], float]:
        """The context objects an edit replays with, and the seconds spent encoding them here: kept
        or bundled ones as they are (the phone keeps what it encoded, like what it fetched); else,
        with ``encode_prompts`` and a model that holds its text encoder, the prompt's embeddings
        computed here when the timing model says so; else fetched."""
        s = self.session
        entries, model = manifest.context, manifest.model.name
        template, version = manifest.template_id, manifest.version
        have = [f"context/{e.name}" in bundled or (s.cache is not None and s.cache.has_object(
            template, version, e.name)) for e in entries]
        if s.encode_prompts and entries and not all(have) and adapter.encodes_prompt:
            made = s.cache.read_made(template, version, MADE_CONTEXT) if s.cache is not None else None
            if made is not None and made_fits(made, {e.name: tuple(e.shape) for e in entries}):
                return made, 0.0
            if encode_on_phone(sum(e.length for e in entries), s.compute_model.prepare_s(model, PROMPT),
                               s.estimator.estimate(), s.estimator.rtt_s):
                started = time.monotonic()
                context = adapter.prompt_context(manifest.prompt)
                encode_s = time.monotonic() - started
                s.compute_model.observe_prepare(model, PROMPT, encode_s)
                if s.cache is not None:
                    s.cache.write_made(template, version, MADE_CONTEXT, context)
                return context, encode_s
        return self.decoded(manifest, "context", http_api.context_path, cancel, bundled), 0.0

    def template_source(self, manifest: PhoneManifest, adapter: ModelAdapter, cancel: threading.Event | None,
                        bundled: dict[str, bytes]) -> tuple[Callable[[], dict[str, np.ndarray]], float]:
        """What makes the template's source when the phone first computes a block: the source
        this phone made for the version before, or the source objects when they are kept here
        already or the version has no image; else the template's JPEG (kept, bundled or fetched
        now), which the model's own image codec turns into the source then, on the compute stage
        (a fraction of a second on the phone, for a fourth to a sixth of the objects' bytes), and
        which the phone keeps. With the seconds that is predicted to take."""
        s = self.session
        template, version = manifest.template_id, manifest.version
        image = next((e for e in manifest.images if e.name == TEMPLATE_IMAGE), None)
        made = s.cache.read_made(template, version, MADE_SOURCE) if s.cache is not None else None
        if made is not None and made_fits(made, adapter.source_limits()):
            return lambda: made, 0.0
        kept = s.cache is not None and bool(manifest.source) and all(
            s.cache.has_object(template, version, e.name) for e in manifest.source)
        if image is None or kept:
            source = self.decoded(manifest, "source", http_api.source_path, cancel, bundled)
            return lambda: source, 0.0
        data = self._bytes(manifest, "source", image, http_api.source_path, cancel, bundled)

        def from_image() -> dict[str, np.ndarray]:
            started = time.monotonic()
            source = adapter.source_from_image(decode_published(data, image.width, image.height))
            s.compute_model.observe_prepare(manifest.model.name, SOURCE, time.monotonic() - started)
            if s.cache is not None:  # the next edit of the version starts from it
                s.cache.write_made(template, version, MADE_SOURCE, source)
            return source

        return from_image, s.compute_model.prepare_s(manifest.model.name, SOURCE) or 0.0

    def shard_hashes(self, manifest: PhoneManifest, cancel: threading.Event | None) -> ShardHashes:
        """Where ``manifest``'s shards' sha256s come from: the manifest, else its shard hashes object,
        kept on the phone or fetched the first time a shard needs its sha256 (and kept)."""
        s = self.session
        ref = manifest.shard_hashes
        if manifest.hashed or ref is None:
            return ShardHashes(manifest)
        template, version = manifest.template_id, manifest.version

        def load() -> bytes:
            data = None if s.cache is None else s.cache.read_object(template, version, SHARD_HASHES, ref.sha256,
                                                                     ref.length)
            if data is None:
                data = self._download(http_api.hashes_path(template, version), ref, cancel)
                if s.cache is not None:
                    s.cache.write_object(template, version, SHARD_HASHES, data)
            return data

        return ShardHashes(manifest, load, kept=s.cache is not None and s.cache.has_object(
            template, version, SHARD_HASHES))

    def _bytes(self, manifest: PhoneManifest, kind: str, entry: PhoneObject | PhoneImage,
               path_of: Callable[[str, int, str], str], cancel: threading.Event | None,
               bundled: dict[str, bytes]) -> bytes:
        """An object's verified bytes: kept on the phone, bundled with the manifest, else downloaded (and kept)."""
        s = self.session
        template, version = manifest.template_id, manifest.version
        data = None if s.cache is None else s.cache.read_object(template, version, entry.name, entry.sha256,
                                                                 entry.length)
        if data is None:
            data = bundled.get(f"{kind}/{entry.name}")
            if data is None or hashlib.sha256(data).hexdigest() != entry.sha256:  # not bundled, or damaged
                data = self._download(path_of(template, version, entry.name), entry, cancel)
            if s.cache is not None:
                s.cache.write_object(template, version, entry.name, data)
        return data

    def _download(self, path: str, entry: PhoneObject | PhoneImage | PhoneHashes,
                  cancel: threading.Event | None) -> bytes:
        s = self.session
        got = s.transport.download(path, sha256=entry.sha256, length=entry.length, cancel=cancel)
        # the same link as the shards: a phone that computed everything last time still learns its rate
        s.meter.response(len(got.data), first_byte_at=got.first_byte_at, arrived_at=got.arrived_at,
                         requested_at=got.requested_at, counted=False)
        return got.data
