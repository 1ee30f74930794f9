"""The build ships klein's prompt embeddings transform-coded where the edit stays within the parity
tolerance: a fraction of their bytes, and a phone's edit (a request the build never saw) within
``PARITY_MAX_ABS`` of the edit with the embeddings as the text encoder made them."""

from __future__ import annotations

import numpy as np

from sakura.platform.context import LOWRANK, decode_context, encode_context
from sakura.platform.images import fit_image, load_image
from sakura.platform.library import TemplateLibrary
from sakura.platform.models import EditRequest, Schedule, Template
from sakura.platform.store import open_store
from sakura.platform.template_image import decode_published
from sakura.platform.verify import PARITY_MAX_ABS
from tests.helpers import make_builder, publish


def test_the_prompt_embeddings_ship_coded_and_the_edit_stays_within_parity(klein_folder, klein, tmp_path):
    uri = f"file://{tmp_path / 'lib'}"
    library = TemplateLibrary(open_store(uri))
    builder = make_builder(str(klein_folder), steps=2)
    publish(library, builder, uri, "tpl", "skimage:brick")
    manifest = library.manifest("tpl")
    (entry,) = manifest.context
    exact_embeds = klein.template_context(Template(np.zeros((8, 8, 3), np.float32), "p"))[entry.name]
    assert entry.encoding == LOWRANK and entry.length < len(encode_context(exact_embeds)[0])
    shipped = decode_context(library.store.get(entry.key), tuple(entry.shape), entry.dtype, entry.encoding)
    assert not np.array_equal(shipped, exact_embeds)  # lossy, and yet:
    image = manifest.images[0]
    template = Template(decode_published(library.store.get(image.key), image.width, image.height), "p")
    schedule, res = Schedule(steps=2), klein.resolution
    kv = klein.capture(template, EditRequest(fit_image(load_image("skimage:chelsea"), res), seed=0), schedule).kv
    request = EditRequest(fit_image(load_image("skimage:coffee"), res), seed=9)  # not a calibration photo
    edits = [klein.edit_image(kv, "p", request, schedule, context={entry.name: e}) for e in (exact_embeds, shipped)]
    assert float(np.abs(edits[0] - edits[1]).max()) <= PARITY_MAX_ABS
