"""The template's published image: one JPEG, the template's image for everything derived from it.

A phone that computes template KV itself needs the template's source (reference latents or
cells, :meth:`~sakura.platform.models.ModelAdapter.template_source`). Its own image codec (the
VAE every klein phone loads) makes that source from the template's image, which as a JPEG is a
quarter to a sixth of the latents' bytes: what the stock pipeline downloads too. So the cloud
publishes the template's image as a JPEG and builds every derived object (the KV, the source, the
stock reference) from the pixels that JPEG decodes to, never from the original: the KV a phone
computes from the JPEG then equals the KV it fetches to the last bit on the same software (JPEG
decoding is deterministic for one libjpeg build; a phone with another may differ in rounding).

The JPEG comes from the network: :func:`decode_published` checks its header (format, mode, size)
before anything is decoded, so a hostile one allocates no more than the model's image.
"""

from __future__ import annotations

import io
import warnings
from typing import TYPE_CHECKING, Literal

import numpy as np

from sakura.platform.errors import ImageError

if TYPE_CHECKING:
    from sakura.platform.models import ModelAdapter, Template

#: The JPEG quality the cloud publishes template images at. An estimate of how an app ships a
#: photo; the stock on-device baseline downloads the same (``evaluation.geometry.template_source_bytes``).
JPEG_QUALITY = 90
IMAGE_FORMAT: Literal["jpeg"] = "jpeg"
#: The name of the template's image among a version's objects.
TEMPLATE_IMAGE = "template_image"
_SOI = b"\xff\xd8\xff"


def template_for(adapter: ModelAdapter, image: np.ndarray, prompt: str,
                 task: str = "custom") -> tuple[Template, bytes | None]:
    """The template a build makes of ``image`` for ``adapter``, and the JPEG it publishes: for a
    model that computes template KV on the phone, the image becomes the JPEG's pixels; for the
    others it stays as given and nothing is published."""
    from sakura.platform.models import Template

    if not adapter.computes_template:
        return Template(image, prompt, task), None
    jpeg, pixels = publish_image(image)
    return Template(pixels, prompt, task), jpeg


def max_jpeg_bytes(width: int, height: int) -> int:
    """A bound on a template JPEG's length a client accepts: no more than 4 bytes a pixel (a
    quality-100, unsubsampled JPEG of noise stays under 3) plus 64 KiB of headers."""
    return 4 * width * height + (64 << 10)


def publish_image(image: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The JPEG of an HxWx3 image in [0, 1], and the image it decodes to (float32 in [0, 1]):
    the template's image from then on."""
    from PIL import Image

    pixels = (np.clip(np.asarray(image, dtype=np.float32), 0.0, 1.0) * 255.0).round().astype(np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ImageError(f"a template image is HxWx3, not {pixels.shape}")
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="JPEG", quality=JPEG_QUALITY)
    data = out.getvalue()
    height, width = pixels.shape[:2]
    return data, decode_published(data, width, height)


def decode_published(data: bytes, width: int, height: int) -> np.ndarray:
    """A published JPEG's pixels (HxWx3 float32 in [0, 1]), or an :class:`ImageError`: it must be
    a baseline or progressive RGB JPEG of exactly ``width`` x ``height``, checked before decoding."""
    from PIL import Image

    if not data.startswith(_SOI):
        raise ImageError("the template image is not a JPEG")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data), formats=["JPEG"])
            if image.size != (width, height) or image.mode != "RGB":
                raise ImageError(f"the template image is a {image.size[0]}x{image.size[1]} {image.mode} JPEG; "
                                 f"the manifest says {width}x{height} RGB")
            image.load()
        except ImageError:
            raise
        except Image.DecompressionBombError:  # Pillow's own bound, checked from the header too
            raise ImageError(f"the template image claims far more pixels than the manifest's "
                             f"{width}x{height}") from None
        except Exception as exc:  # a damaged JPEG fails in many ways (Pillow's errors, OSError, struct...)
            raise ImageError(f"the template image is not a readable JPEG: {type(exc).__name__}") from None
    pixels = np.asarray(image, dtype=np.uint8)
    if pixels.shape != (height, width, 3):
        raise ImageError(f"the template image decoded to {pixels.shape}, not {(height, width, 3)}")
    return pixels.astype(np.float32) / 255.0
