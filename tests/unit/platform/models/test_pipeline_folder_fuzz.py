"""A pipeline folder's own JSON files fuzzed (issue 36, item 5.5): whatever ``model_index.json``
and ``sakura.json`` hold (any JSON value, any bytes, NaN and infinities, numbers past any bound),
reading them gives a folder whose components all come from diffusers or transformers and settings
within their bounds, or a :class:`PipelineError` naming the file; nothing is written. The cases
differ from run to run (``tests/hypothesis_seed.py``); ``test_pipeline_folder_input`` has the
hand-picked ones (FIFOs, links, sizes)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sakura.platform.models.pipelines import PipelineError
from sakura.platform.models.pipelines.folder import INDEX, LIBRARIES, PipelineFolder
from sakura.platform.models.pipelines.settings import (
    SETTINGS,
    KleinSettings,
    KontextSettings,
    SD3Settings,
    read_settings,
)
from tests.hypothesis_seed import name_the_seed, per_run_seed

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
NAMES = st.one_of(st.text(max_size=12), st.sampled_from(["vae", "transformer", "../outside", "/etc", "_class_name",
                                                         "resolution", "text_encoder_out_layers", "guidance_scale"]))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(), st.text(max_size=12),
                    st.sampled_from(["diffusers", "transformers", "os", "../diffusers", "AutoencoderKL"]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(NAMES, inner, max_size=5)), max_leaves=16)
SETTINGS_MODELS = [KleinSettings, KontextSettings, SD3Settings]


def _write(folder, name: str, body: bytes | object) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()  # NaN and Infinity as JSON reads them
    (folder / name).write_bytes(data)


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "pipe"
    folder.mkdir()
    return folder


@per_run_seed
@FUZZ
@given(index=st.one_of(JSON, st.dictionaries(NAMES, JSON, max_size=6).map(lambda d: {"_class_name": "X", **d}),
                       st.binary(max_size=200)))
def test_any_model_index_reads_as_components_of_the_two_libraries_or_a_pipeline_error(folder, index):
    name_the_seed()
    _write(folder, INDEX, index)
    try:
        read = PipelineFolder.read(folder)
    except PipelineError as exc:
        assert str(exc).startswith(str(folder / INDEX)) and len(str(exc)) < 1000
    else:
        assert isinstance(read.class_name, str)
        assert all(lib in LIBRARIES and isinstance(cls, str) for lib, cls in read.components.values())
    assert sorted(p.name for p in folder.iterdir()) == [INDEX]


@per_run_seed
@FUZZ
@given(model=st.sampled_from(SETTINGS_MODELS),
       body=st.one_of(JSON, st.dictionaries(NAMES, JSON, max_size=4), st.binary(max_size=200)))
def test_any_sakura_json_reads_as_settings_within_their_bounds_or_a_pipeline_error(folder, model, body):
    name_the_seed()
    _write(folder, INDEX, {"_class_name": "Flux2KleinKVPipeline"})
    _write(folder, SETTINGS, body)
    try:
        read = read_settings(PipelineFolder.read(folder), model)
    except PipelineError as exc:
        assert str(exc).startswith(str(folder / SETTINGS)) and len(str(exc)) < 1000
        return
    assert isinstance(read, model)
    for name, field in model.model_fields.items():
        value = getattr(read, name)
        for item in value if isinstance(value, tuple) else (value,):
            assert isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item)
            for bound in field.metadata:
                if hasattr(bound, "ge"):
                    assert item >= bound.ge
                if hasattr(bound, "le"):
                    assert item <= bound.le
