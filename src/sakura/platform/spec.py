"""Template spec files: the YAML list of templates a build turns into a KV library.

```yaml
templates:
  - id: face-astronaut          # DESIGN.md's template id format
    task: face_swap             # face_swap | try_on | style_transfer | custom
    image: skimage:astronaut    # a path relative to this file, or a bundled sample image
    prompt: put this face on the person in the photo
    resolution: 32              # optional; the model's own resolution when omitted
```

Every error names the file, the template and the field. Each image is checked from its header
(readable, an image, at most :data:`~sakura.platform.images.MAX_IMAGE_PIXELS`), not decoded.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sakura.platform.errors import ImageError, SpecError
from sakura.platform.ids import validate_template_id
from sakura.platform.images import check_image

MAX_SPEC_BYTES = 1 << 20
#: Nesting levels a spec may use (it needs 3: file, templates list, entry); PyYAML composes
#: recursively, so deeper documents would end in a RecursionError.
MAX_SPEC_DEPTH = 16


class Task(str, enum.Enum):
    FACE_SWAP = "face_swap"
    TRY_ON = "try_on"
    STYLE_TRANSFER = "style_transfer"
    CUSTOM = "custom"


class TemplateEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    task: Task
    image: str = Field(min_length=1, max_length=4096)
    prompt: str = Field(min_length=1, max_length=2000)
    resolution: int | None = Field(default=None, ge=8, le=4096)

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return validate_template_id(value)


class TemplateSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    templates: list[TemplateEntry] = Field(min_length=1)
    #: Directory that relative image paths are resolved against (the spec file's folder).
    base_dir: Path = Path(".")


def load_spec(path: str | Path) -> TemplateSpec:
    """Read and validate a spec file; raise :class:`SpecError` naming file, template and field."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise SpecError(f"{path}: spec is larger than {MAX_SPEC_BYTES} bytes")
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_BoundedLoader)
    except FileNotFoundError:
        raise SpecError(f"{path}: spec file not found") from None
    except _TooDeep:
        raise SpecError(f"{path}: YAML nested deeper than {MAX_SPEC_DEPTH} levels") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: not a readable YAML file: {exc}") from None
    return parse_spec(raw, source=str(path), base_dir=path.parent)


class _TooDeep(yaml.YAMLError):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses documents nested deeper than :data:`MAX_SPEC_DEPTH`."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._depth >= MAX_SPEC_DEPTH:
            raise _TooDeep()
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def parse_spec(raw: Any, *, source: str, base_dir: Path) -> TemplateSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("templates"), list):
        raise SpecError(f"{source}: expected a mapping with a 'templates' list")
    try:
        spec = TemplateSpec(templates=raw["templates"], base_dir=base_dir, **_other_keys(raw))
    except ValidationError as exc:
        raise SpecError(_describe(exc, raw["templates"], source)) from None
    _check_unique_ids(spec, source)
    for entry in spec.templates:
        try:
            check_image(entry.image, base_dir)
        except ImageError as exc:
            raise SpecError(f"{source}: template {entry.id!r}: field 'image': {exc}") from None
    return spec


def _other_keys(raw: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys besides ``templates``: unknown ones fail validation (``base_dir`` is derived)."""
    return {("base_dir (not allowed in a spec)" if k == "base_dir" else k): v for k, v in raw.items() if k != "templates"}


def _check_unique_ids(spec: TemplateSpec, source: str) -> None:
    seen: set[str] = set()
    for entry in spec.templates:
        if entry.id in seen:
            raise SpecError(f"{source}: template {entry.id!r}: field 'id': duplicate template id")
        seen.add(entry.id)


def _describe(exc: ValidationError, templates: list[Any], source: str) -> str:
    err = exc.errors()[0]
    loc = list(err["loc"])
    if len(loc) >= 2 and loc[0] == "templates" and isinstance(loc[1], int):
        index = loc[1]
        entry = templates[index] if index < len(templates) else None
        name = entry.get("id") if isinstance(entry, dict) and isinstance(entry.get("id"), str) else f"#{index + 1}"
        field = ".".join(str(p) for p in loc[2:]) or "(entry)"
        return f"{source}: template {name!r}: field '{field}': {err['msg']}"
    field = ".".join(str(p) for p in loc) or "(top level)"
    return f"{source}: field '{field}': {err['msg']}"
