"""The template's published JPEG: a deterministic round trip, its size bound, and refusal of hostile input."""

from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pytest
from PIL import Image, ImageFile

from sakura.platform.errors import ImageError
from sakura.platform.images import fit_image, load_image
from sakura.platform.template_image import decode_published, max_jpeg_bytes, publish_image


@pytest.fixture(scope="module")
def brick():
    return fit_image(load_image("skimage:brick"), 64)


@pytest.fixture(scope="module")
def jpeg(brick):
    return publish_image(brick)[0]


def encode(pixels: np.ndarray, fmt: str = "JPEG", mode: str | None = None, **options) -> bytes:
    image = Image.fromarray(pixels)
    out = io.BytesIO()
    (image.convert(mode) if mode else image).save(out, fmt, **options)
    return out.getvalue()


def noise(side: int) -> np.ndarray:
    return np.random.default_rng(side).integers(0, 256, (side, side, 3), dtype=np.uint8)


def with_sof_size(data: bytes, height: int, width: int) -> bytes:
    """``data`` with the size its SOF0 header claims patched (after marker, length and precision)."""
    at = data.index(b"\xff\xc0") + 5
    return data[:at] + height.to_bytes(2, "big") + width.to_bytes(2, "big") + data[at + 4 :]


def test_publish_round_trips_to_the_pixels_a_client_decodes(brick):
    data, pixels = publish_image(brick)
    assert data.startswith(b"\xff\xd8")
    assert pixels.shape == (64, 64, 3) and pixels.dtype == np.float32
    assert 0.0 <= pixels.min() and pixels.max() <= 1.0
    assert np.abs(pixels - brick).mean() < 0.03
    assert np.array_equal(pixels, decode_published(data, 64, 64))
    assert publish_image(brick)[0] == data  # deterministic: the same image gives the same bytes


def test_jpeg_is_small_and_noise_stays_under_the_bound(jpeg):
    assert len(jpeg) < 64 * 64 * 3
    for side in (64, 256):
        assert len(encode(noise(side), quality=100, subsampling=0)) < max_jpeg_bytes(side, side)


def test_refuses_bytes_that_are_not_a_jpeg(brick):
    png = encode((brick * 255).round().astype(np.uint8), "PNG")
    for data in (png, np.random.default_rng(0).bytes(1000), b""):
        with pytest.raises(ImageError, match="is not a JPEG"):
            decode_published(data, 64, 64)


def test_refuses_a_jpeg_of_another_size(jpeg):
    with pytest.raises(ImageError, match="the manifest says 32x32 RGB"):
        decode_published(jpeg, 32, 32)
    with pytest.raises(ImageError, match="is a 128x128 RGB JPEG"):
        decode_published(encode(noise(128)), 64, 64)


@pytest.mark.parametrize("mode", ["L", "CMYK"])
def test_refuses_a_jpeg_that_is_not_rgb(mode):
    with pytest.raises(ImageError, match=f"is a 64x64 {mode} JPEG"):
        decode_published(encode(noise(64), mode=mode), 64, 64)


def test_refuses_a_truncated_jpeg(jpeg):
    with pytest.raises(ImageError, match="not a readable JPEG"):
        decode_published(jpeg[: len(jpeg) // 2], 64, 64)


# Past twice Pillow's bomb limit, Image.open itself refuses the header; under it, the module's size check does.
@pytest.mark.parametrize("side, message", [(60000, "claims far more pixels than"), (8000, "is a 8000x8000 RGB JPEG")])
def test_refuses_a_huge_claimed_size_from_the_header(side, message, monkeypatch):
    bomb = with_sof_size(encode(noise(16)), side, side)
    # tracemalloc does not see Pillow's C buffers: that it never decodes is checked directly
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: pytest.fail("decoded a refused JPEG"))
    tracemalloc.start()
    try:
        with pytest.raises(ImageError, match=message):
            decode_published(bomb, 64, 64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20


def test_publish_refuses_an_image_that_is_not_hxwx3():
    with pytest.raises(ImageError, match="is HxWx3"):
        publish_image(np.zeros((8, 8), dtype=np.float32))
