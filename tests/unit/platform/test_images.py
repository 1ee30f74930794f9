from __future__ import annotations

import numpy as np
import pytest

from sakura.platform.errors import ImageError
from sakura.platform.images import BUNDLED_SKIMAGE, fit_image, load_image


@pytest.mark.parametrize("name", sorted(BUNDLED_SKIMAGE))
def test_every_bundled_image_loads_as_rgb(name):
    image = load_image(f"skimage:{name}")
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3


def test_fit_image_crops_and_resizes_to_unit_range():
    out = fit_image(load_image("skimage:astronaut"), 32)
    assert out.shape == (32, 32, 3) and out.dtype == np.float32
    assert 0.0 <= out.min() and out.max() <= 1.0 and out.std() > 0.05


def test_bad_image_references(tmp_path):
    with pytest.raises(ImageError):
        load_image("skimage:../../etc/passwd")
    with pytest.raises(ImageError):
        load_image(str(tmp_path / "missing.png"))
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not an image")
    with pytest.raises(ImageError):
        load_image(str(junk))


def write_huge_png(path, side: int = 12000) -> None:
    """A valid 1-bit side x side PNG of a few kB (zero rows compress to almost nothing)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    deflate, row = zlib.compressobj(9), bytes(1 + (side + 7) // 8)
    idat = b"".join(deflate.compress(row) for _ in range(side)) + deflate.flush()
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
                     + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


@pytest.fixture
def decodes(monkeypatch) -> list[str]:
    """Records every Pillow decode (ImageFile.load allocates and fills the pixels) and refuses it."""
    from PIL import ImageFile

    calls: list[str] = []

    def refuse(image):
        calls.append(image.format)
        raise AssertionError("decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)
    return calls


def test_an_oversized_image_is_refused_from_its_header_without_decoding(tmp_path, decodes):
    from sakura.platform.images import MAX_IMAGE_PIXELS, check_image

    path = tmp_path / "huge.png"
    write_huge_png(path)
    assert path.stat().st_size < 100_000 and 12000 * 12000 > MAX_IMAGE_PIXELS
    for load in (check_image, load_image):
        with pytest.raises(ImageError) as info:
            load(str(path))
        assert str(path) in str(info.value) and "12000x12000" in str(info.value) and "40 MP" in str(info.value)
    assert decodes == []


def test_the_pixel_limit_is_a_parameter(tmp_path):
    from sakura.platform.images import check_image

    path = tmp_path / "small.png"
    write_huge_png(path, side=100)
    check_image(str(path), max_pixels=10_000)
    assert load_image(str(path), max_pixels=10_000).shape == (100, 100, 3)
    with pytest.raises(ImageError, match="100x100"):
        load_image(str(path), max_pixels=9_999)


def test_unreadable_images_give_one_line_errors_naming_the_file(tmp_path):
    from sakura.platform.images import check_image

    text = tmp_path / "notes.png"
    text.write_text("this is not an image\nsecond line\n")
    good = tmp_path / "good.png"
    from skimage import io as skio

    skio.imsave(good, load_image("skimage:coffee")[:64, :64], check_contrast=False)
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(good.read_bytes()[:400])
    check_image(str(truncated))  # the header is intact: only decoding finds the damage
    for path, words in ((text, "not an image"), (truncated, "cannot decode")):
        with pytest.raises(ImageError) as info:
            load_image(str(path))
        message = str(info.value)
        assert str(path) in message and words in message and "\n" not in message
    with pytest.raises(ImageError, match="not an image"):
        check_image(str(text))
    with pytest.raises(ImageError, match="not found"):
        check_image(str(tmp_path / "absent.png"))
    with pytest.raises(ImageError, match="unknown bundled image"):
        check_image("skimage:nope")


def test_an_animated_image_loads_its_first_frame_only(tmp_path):
    from PIL import Image

    frames = [Image.fromarray(np.full((20, 30, 3), 40 * (i + 1), np.uint8)) for i in range(3)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    image = load_image(str(tmp_path / "anim.gif"))
    assert image.shape == (20, 30, 3) and int(image[0, 0, 0]) == 40


def test_files_decode_as_before(tmp_path):
    from skimage import io as skio

    for name, ref in (("rgb.png", "skimage:astronaut"), ("gray.png", "skimage:camera"), ("photo.jpg", "skimage:coffee")):
        skio.imsave(tmp_path / name, load_image(ref) if name != "gray.png" else load_image(ref)[..., 0],
                    check_contrast=False)
        expected = skio.imread(tmp_path / name)
        expected = np.stack([expected] * 3, axis=-1) if expected.ndim == 2 else expected[..., :3]
        assert np.array_equal(load_image(str(tmp_path / name)), expected)
