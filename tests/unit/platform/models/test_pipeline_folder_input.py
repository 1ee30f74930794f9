"""A folder the user points the loader at (issue 36, item 5.5): its ``model_index.json``, its
``sakura.json`` and a bare checkpoint's ``config.json`` may hold anything. Every problem is a typed
error naming the file; SAKURA reads its own JSON files only as regular files of at most
``MAX_JSON_BYTES`` (never a FIFO or a device, never past the cap), and no name in them becomes a
path: only the components the pipeline class needs, by SAKURA's own names, are loaded.

Links are followed (a hub cache's snapshot folders link every file into its blob store), so the
folder's owner decides what its files are; what it cannot do is make SAKURA read without bound,
wait forever, or load a path a JSON field names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sakura.platform.errors import UnknownModel
from sakura.platform.models import load_model
from sakura.platform.models.pipelines import PipelineError, PipelineKind, load_pipeline, register_pipeline
from sakura.platform.models.pipelines.folder import INDEX, MAX_JSON_BYTES, PIPELINE_KINDS, PipelineFolder
from sakura.platform.models.pipelines.settings import SETTINGS, KleinSettings, read_settings

HUGE = b"9" * 5000  # past int()'s digit limit: json.loads raises a bare ValueError


def _index(folder: Path, body: bytes | dict) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / INDEX).write_bytes(body if isinstance(body, bytes) else json.dumps(body).encode())
    return folder


@pytest.mark.parametrize("body, match", [
    (b"not json", "unreadable"),
    (b"\xff\xfe{}", "unreadable"),
    (b"[" * 100_000 + b"]" * 100_000, "unreadable"),
    (b'{"_class_name": "X", "is_distilled": ' + HUGE + b"}", "unreadable"),
    (b"[]", "'_class_name': missing"),
    (b'{"_class_name": ["Flux2KleinKVPipeline"]}', "'_class_name': missing"),
    (b'{"_class_name": ' + HUGE + b"}", "unreadable"),
    (b'{"_class_name": "X", "vae": ["os", "system"]}', "library 'os' is not one of"),
    (b'{"_class_name": "X", "vae": ["../diffusers", "AutoencoderKL"]}', "library '../diffusers'"),
    (b" " * MAX_JSON_BYTES + b"{}", f"larger than {MAX_JSON_BYTES} bytes"),
], ids=["not-json", "not-utf8", "nested", "huge-number", "a-list", "class-a-list", "class-huge", "library-os",
        "library-path", "too-large"])
def test_a_hostile_model_index_is_a_pipeline_error_naming_it(tmp_path, body, match):
    folder = _index(tmp_path / "pipe", body)
    with pytest.raises(PipelineError, match=match) as err:
        load_pipeline(folder)
    assert str(err.value).startswith(str(folder / INDEX))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_model_index_that_is_a_fifo_a_device_or_a_folder_is_refused_without_reading_it(tmp_path):
    folder = tmp_path / "pipe"
    folder.mkdir()
    os.mkfifo(folder / INDEX)  # no writer: a blocking read would wait forever
    with pytest.raises(PipelineError, match="not a regular file"):
        PipelineFolder.read(folder)
    (folder / INDEX).unlink()
    (folder / INDEX).symlink_to("/dev/zero")  # endless: a read without a cap would fill memory
    with pytest.raises(PipelineError, match="not a regular file"):
        PipelineFolder.read(folder)
    (folder / INDEX).unlink()
    (folder / INDEX).mkdir()
    with pytest.raises(PipelineError, match=str(folder / INDEX)):
        PipelineFolder.read(folder)


@pytest.mark.parametrize("class_name", ["utils", "__class__", "__builtins__", "..", "/etc/passwd", "x" * 5000])
def test_a_component_class_that_is_no_loadable_class_is_a_pipeline_error(tmp_path, class_name):
    folder = PipelineFolder.read(_index(tmp_path / "pipe", {"_class_name": "X", "vae": ["diffusers", class_name]}))
    with pytest.raises(PipelineError, match="field 'vae': diffusers has no class") as err:
        folder.load("vae")
    assert len(str(err.value)) < 300  # a long name is not echoed whole



@pytest.mark.parametrize("config", [
    {"layers_per_block": "x"}, {"in_channels": [3]}, {"act_fn": 5}, {"down_block_types": [None]},
    {"norm_num_groups": 0}, {"latent_channels": -1},
], ids=["a-string-for-a-count", "a-list-for-a-count", "a-number-for-a-name", "null-for-a-name", "zero-groups",
        "negative-size"])
def test_a_component_config_of_the_wrong_types_or_values_is_a_pipeline_error_naming_it(tmp_path, config):
    """What the library's constructors make of it (TypeError, AttributeError, ZeroDivisionError,
    torch's RuntimeError) is the module's typed error, naming the component's folder."""
    from safetensors.torch import save_file

    folder = PipelineFolder.read(_index(tmp_path / "pipe", {"_class_name": "X", "vae": ["diffusers", "AutoencoderKL"]}))
    (folder.path / "vae").mkdir()
    (folder.path / "vae" / "config.json").write_text(json.dumps({"_class_name": "AutoencoderKL", **config}))
    save_file({}, str(folder.path / "vae" / "diffusion_pytorch_model.safetensors"))
    with pytest.raises(PipelineError, match="cannot load AutoencoderKL") as err:
        folder.load("vae")
    assert str(err.value).startswith(str(folder.path / "vae")) and len(str(err.value)) < 600


@pytest.mark.parametrize("body", [b'"black-forest-labs/FLUX.2-klein-4B"', b"[1, 2]", b"null"],
                         ids=["a-hub-id", "a-list", "null"])
def test_a_component_config_that_is_no_object_is_a_pipeline_error_and_never_reaches_the_network(
        tmp_path, monkeypatch, body):
    """diffusers takes a config that is a string or a list for a hub model id and asks the hub for
    it (23 s of retries offline): the folder's config is checked first, and no load asks the hub."""
    import socket

    from safetensors.torch import save_file

    asked: list[object] = []

    def no_network(host, *args, **kwargs):
        asked.append(host)
        raise socket.gaierror("no network in this test")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    folder = PipelineFolder.read(_index(tmp_path / "pipe", {"_class_name": "X", "vae": ["diffusers", "AutoencoderKL"]}))
    (folder.path / "vae").mkdir()
    (folder.path / "vae" / "config.json").write_bytes(body)
    save_file({}, str(folder.path / "vae" / "diffusion_pytorch_model.safetensors"))
    with pytest.raises(PipelineError, match="a JSON object expected") as err:
        folder.load("vae")
    assert str(err.value).startswith(str(folder.path / "vae" / "config.json"))
    (folder.path / "vae" / "config.json").unlink()  # none at all: the library's own error, offline
    with pytest.raises(PipelineError, match="cannot load AutoencoderKL"):
        folder.load("vae")
    scheduler = ["diffusers", "FlowMatchEulerDiscreteScheduler"]
    folder = PipelineFolder.read(_index(tmp_path / "pipe", {"_class_name": "X", "scheduler": scheduler}))
    (folder.path / "scheduler").mkdir()
    (folder.path / "scheduler" / "scheduler_config.json").write_bytes(body)
    with pytest.raises(PipelineError, match="a JSON object expected"):
        folder.load("scheduler")
    assert asked == []


def toy_adapter(folder: PipelineFolder, components: dict, dtype) -> dict:
    """The adapter of the toy pipeline class below: what it was given."""
    return components


def test_names_in_the_index_never_become_paths(tmp_path, monkeypatch):
    monkeypatch.setitem(PIPELINE_KINDS, "ToyPipeline", PIPELINE_KINDS.get("ToyPipeline"))  # restored after
    register_pipeline(PipelineKind("ToyPipeline", phone=("vae",), cloud=(),
                                   loader=f"{__name__}:toy_adapter"))
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = _index(tmp_path / "pipe", {
        "_class_name": "ToyPipeline", "vae": ["diffusers", "AutoencoderKL"],
        "../outside": ["diffusers", "AutoencoderKL"], str(outside): ["diffusers", "AutoencoderKL"],
        "_name_or_path": str(outside), "is_distilled": "../outside",
    })
    (folder / "vae").mkdir()
    loaded: list[Path] = []
    monkeypatch.setattr(PipelineFolder, "load", lambda self, name, dtype=None: loaded.append(self.path / name))
    assert set(load_pipeline(folder)) == {"vae"}
    assert loaded == [folder / "vae"]
    (folder / "vae").rmdir()
    with pytest.raises(PipelineError, match="component folder 'vae' listed in model_index.json is missing"):
        load_pipeline(folder)  # the listed ../outside is there, and is not looked at


def _settings(tmp_path: Path, body: bytes | None) -> PipelineFolder:
    folder = PipelineFolder.read(_index(tmp_path / "pipe", {"_class_name": "Flux2KleinKVPipeline"}))
    if body is not None:
        (folder.path / SETTINGS).write_bytes(body)
    return folder


@pytest.mark.parametrize("body, match", [
    (b'{"resolution": ' + HUGE + b"}", "unreadable"),
    (b'{"resolution": 1e400}', "field 'resolution'"),
    (b'{"resolution": 100000000000000000000}', "field 'resolution'"),
    (b'{"resolution": [512]}', "field 'resolution'"),
    (b'{"resolution": null}', "field 'resolution'"),
    (b'{"resolution": 512.5}', "field 'resolution'"),
    (b'{"max_sequence_length": -1}', "field 'max_sequence_length'"),
    (b'{"text_encoder_out_layers": [100000000000000000000]}', "field 'text_encoder_out_layers.0'"),
    (b'{"text_encoder_out_layers": ' + b"[9, " * 50 + b"9" + b"]" * 50 + b"}", "field 'text_encoder_out_layers"),
    (b'{"text_encoder_out_layers": []}', "field 'text_encoder_out_layers'"),
    (b'{"resolution": 512, "weights": "../../secret"}', "field 'weights'"),
    (b"[1, 2]", "Input should be"),
    (b"\xff", "unreadable"),
], ids=["huge-number", "infinite", "large", "list", "null", "fraction", "negative", "huge-layer", "nested-layers",
        "no-layers", "unknown-path-field", "not-an-object", "not-utf8"])
def test_a_hostile_sakura_json_is_a_pipeline_error_naming_it(tmp_path, body, match):
    folder = _settings(tmp_path, body)
    with pytest.raises(PipelineError, match=match) as err:
        read_settings(folder, KleinSettings)
    assert str(err.value).startswith(str(folder.path / SETTINGS))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_sakura_json_that_is_not_a_file_is_refused_not_skipped(tmp_path):
    folder = _settings(tmp_path, None)
    assert read_settings(folder, KleinSettings) == KleinSettings()  # none: the defaults
    path = folder.path / SETTINGS
    os.mkfifo(path)
    with pytest.raises(PipelineError, match="not a regular file"):
        read_settings(folder, KleinSettings)
    path.unlink()
    path.symlink_to(tmp_path / "nowhere")
    with pytest.raises(PipelineError, match="a link to a file that is not there"):
        read_settings(folder, KleinSettings)
    path.unlink()
    path.symlink_to("/dev/zero")
    with pytest.raises(PipelineError, match="not a regular file"):
        read_settings(folder, KleinSettings)


@pytest.mark.parametrize("body", [
    b"not json", b"[1]", b'{"_class_name": ["FluxTransformer2DModel"]}', b'{"_class_name": ' + HUGE + b"}",
    b'{"_class_name": {"a": 1}}', b'{"_class_name": "' + b"x" * 5000 + b'"}',
], ids=["not-json", "a-list", "class-a-list", "class-huge", "class-an-object", "class-long"])
def test_a_hostile_checkpoint_config_is_an_unknown_model(tmp_path, body):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_bytes(body)
    with pytest.raises(UnknownModel) as err:
        load_model(str(tmp_path / "ckpt"))
    assert str(tmp_path / "ckpt" / "config.json") in str(err.value) and len(str(err.value)) < 400
