"""Diffusers pipeline folders (``model_index.json``): which pipeline classes SAKURA runs, and
which components each side loads.

The cloud loads every component (text encoders and tokenizers included: it encodes each
template's prompt once); the phone loads only what replay needs (the VAE, the transformer and
the scheduler's config), so it never imports a text encoder. Components are loaded by the same
``from_pretrained`` a user's checkpoint goes through. Every problem with a folder is a
:class:`PipelineError` that names the file and the field.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from sakura.platform.errors import SakuraError
from sakura.platform.integrity import read_regular
from sakura.platform.lazy import resolve

INDEX = "model_index.json"
#: diffusers and transformers are the only libraries a component may come from.
LIBRARIES = ("diffusers", "transformers")
#: The most SAKURA reads of a folder's own JSON files (``model_index.json``, ``sakura.json``: a
#: few hundred bytes each) and of a component's ``*config.json`` files (a few kB each).
MAX_JSON_BYTES = 1 << 20


class PipelineError(SakuraError, ValueError):
    code = "invalid_pipeline"


@dataclass(frozen=True)
class PipelineFolder:
    path: Path
    class_name: str
    #: component name -> (library, class name), for the components the folder lists
    components: dict[str, tuple[str, str]]
    extra: dict[str, Any]  # the index's other (non-component) settings, e.g. is_distilled

    @classmethod
    def read(cls, path: str | Path) -> PipelineFolder:
        path = Path(path).expanduser()
        index = path / INDEX
        try:
            raw = read_json(index)
        except FileNotFoundError:
            raise PipelineError(f"{index}: not found (a diffusers pipeline folder has a {INDEX})") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("_class_name"), str):
            raise PipelineError(f"{index}: field '_class_name': missing")
        components, extra = {}, {}
        for name, value in raw.items():
            if name.startswith("_"):
                continue
            if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
                if value[0] not in LIBRARIES:
                    raise PipelineError(
                        f"{index}: field '{name}': library {value[0]!r} is not one of {list(LIBRARIES)}"
                    )
                components[name] = (value[0], value[1])
            elif isinstance(value, list) and value == [None, None]:
                continue  # an optional component the folder does not ship
            else:
                extra[name] = value
        return cls(path, raw["_class_name"], components, extra)

    def require(self, names: tuple[str, ...]) -> None:
        """Every named component is listed and has its folder: else a PipelineError naming it."""
        for name in names:
            if name not in self.components:
                raise PipelineError(f"{self.path / INDEX}: field '{name}': the {self.class_name} component is missing")
            if not (self.path / name).is_dir():
                raise PipelineError(f"{self.path / name}: component folder {name!r} listed in {INDEX} is missing")

    def load(self, name: str, *, dtype: torch.dtype | None = None) -> Any:
        """One component, through its library's own ``from_pretrained``."""
        library, class_name = self.components[name]
        module = importlib.import_module(library)
        try:
            component_class = getattr(module, class_name, None)
        except (ImportError, RuntimeError):  # diffusers' lazy modules: a class whose imports fail
            component_class = None
        if not isinstance(component_class, type) or not hasattr(component_class, "from_pretrained"):
            raise PipelineError(f"{self.path / INDEX}: field '{name}': {library} has no class {class_name[:100]!r} "
                                "with from_pretrained")
        self._check_config(name)
        # Never the hub: the folder is all there is (``_check_config`` has already refused the
        # non-object configs that the library would take for a hub model id)
        kwargs: dict[str, Any] = {"local_files_only": True}
        if dtype is not None and hasattr(component_class, "dtype"):
            kwargs["torch_dtype"] = dtype
        if library == "diffusers" and hasattr(component_class, "dtype"):
            kwargs["low_cpu_mem_usage"] = False  # the default wants the accelerate package; no gain at load
        try:
            return component_class.from_pretrained(self.path / name, **kwargs)
        except torch.OutOfMemoryError:
            raise  # the accelerator's memory, no fault of the folder
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ArithmeticError, RuntimeError) as exc:
            # a config.json of the wrong types or values fails inside the library's constructors: a
            # string for a number (TypeError), a number for a name (AttributeError), a group count of
            # 0 (ZeroDivisionError), a negative size (torch's RuntimeError)
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise PipelineError(f"{self.path / name}: cannot load {class_name}: {first[:300]}") from exc

    def _check_config(self, name: str) -> None:
        """Each of a component's config files (``config.json``, ``scheduler_config.json``,
        ``tokenizer_config.json``, ...) is a JSON object, what the library's ``from_pretrained``
        reads it as, read as SAKURA reads its own JSON: else a PipelineError. (Even offline, a
        scheduler's config that is a string sends diffusers to the hub for that id.)"""
        for path in sorted((self.path / name).glob("*config.json")):
            try:
                config = read_json(path)
            except FileNotFoundError:
                continue  # a dangling link: the library says what it misses
            if not isinstance(config, dict):
                raise PipelineError(f"{path}: a JSON object expected, not {type(config).__name__}")


def read_json(path: Path) -> Any:
    """A folder's own JSON file (a link to one is followed: a hub cache links its files): read
    only as a regular file of at most :data:`MAX_JSON_BYTES` (a FIFO or a device is never read),
    parsed, or a :class:`PipelineError` naming it; ``FileNotFoundError`` when there is none."""
    try:
        data = read_regular(path, MAX_JSON_BYTES)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise PipelineError(f"{path}: unreadable: {exc}") from None
    if len(data) > MAX_JSON_BYTES:
        raise PipelineError(f"{path}: larger than {MAX_JSON_BYTES} bytes")
    try:
        return json.loads(data)
    except ValueError as exc:  # not UTF-8, not JSON, or a number too long for int()
        raise PipelineError(f"{path}: unreadable: {exc}") from None
    except RecursionError:
        raise PipelineError(f"{path}: unreadable: JSON nested too deeply") from None


#: (folder, its loaded components, dtype) -> the adapter (a ModelAdapter).
Loader = Callable[["PipelineFolder", dict[str, Any], torch.dtype], Any]


@dataclass(frozen=True)
class PipelineKind:
    """How SAKURA runs one pipeline class: the components the phone loads, what the cloud loads
    besides them (text encoders, tokenizers), and the ``module:function`` that makes its
    adapter from a folder and its loaded components."""

    class_name: str
    phone: tuple[str, ...]
    cloud: tuple[str, ...]
    loader: str

    def load(self, folder: PipelineFolder, components: dict[str, Any], dtype: torch.dtype) -> Any:
        """The adapter (the loader's module is imported now, not when the table is read)."""
        make: Loader = resolve(self.loader)
        return make(folder, components, dtype)


_LOADERS = "sakura.platform.models.pipelines.kinds"
_PER_STEP_PHONE = ("scheduler", "vae", "transformer")
#: The pipeline classes SAKURA runs, in one place (:func:`register_pipeline` adds more).
PIPELINE_KINDS: dict[str, PipelineKind] = {kind.class_name: kind for kind in (
    PipelineKind("Flux2KleinKVPipeline", phone=("scheduler", "vae", "transformer"),
                 cloud=("text_encoder", "tokenizer"), loader=f"{_LOADERS}:load_klein"),
    PipelineKind("FluxKontextPipeline", phone=_PER_STEP_PHONE,
                 cloud=("text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2"),
                 loader=f"{_LOADERS}:load_kontext"),
    PipelineKind("StableDiffusion3Pipeline", phone=_PER_STEP_PHONE,
                 cloud=("text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2", "text_encoder_3", "tokenizer_3"),
                 loader=f"{_LOADERS}:load_sd3"),
)}


def register_pipeline(kind: PipelineKind) -> None:
    """Run another pipeline class (its loader is imported when a folder of it is loaded)."""
    PIPELINE_KINDS[kind.class_name] = kind


def supported_pipelines() -> list[str]:
    return sorted(PIPELINE_KINDS)


def is_pipeline_folder(path: str | Path) -> bool:
    return (Path(path).expanduser() / INDEX).is_file()


def load_pipeline(path: str | Path, *, phone: bool = False, dtype: torch.dtype = torch.float32) -> Any:
    """The adapter for a pipeline folder; ``phone`` loads only the components replay needs."""
    folder = PipelineFolder.read(path)
    kind = PIPELINE_KINDS.get(folder.class_name)
    if kind is None:
        raise PipelineError(f"{folder.path / INDEX}: field '_class_name': unsupported pipeline "
                            f"{folder.class_name[:100]!r}; SAKURA runs {supported_pipelines()}")
    names = kind.phone if phone else kind.phone + kind.cloud
    folder.require(names)
    components = {name: folder.load(name, dtype=dtype) for name in names}
    return kind.load(folder, components, dtype)
