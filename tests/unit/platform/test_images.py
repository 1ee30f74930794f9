from __future__ import annotations

import numpy as np
import pytest

from sakura.platform.errors import ImageError
from sakura.platform.images import BUNDLED_SKIMAGE, check_image, fit_image, load_image, save_image


@pytest.mark.parametrize("name", sorted(BUNDLED_SKIMAGE))
def test_every_bundled_image_loads_as_rgb(name):
    image = load_image(f"skimage:{name}")
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3


def test_fit_image_crops_and_resizes_to_unit_range():
    out = fit_image(load_image("skimage:astronaut"), 32)
    assert out.shape == (32, 32, 3) and out.dtype == np.float32
    assert 0.0 <= out.min() and out.max() <= 1.0 and out.std() > 0.05


def test_fit_image_shrinks_with_pillows_bilinear_filter():
    """An antialiased shrink (each pixel averages its whole footprint), the same as Pillow's: the
    contract, where scikit-image's Gaussian before was one way to meet it."""
    from PIL import Image

    photo = load_image("skimage:coffee")  # 600 wide, 400 high: its centre square is kept
    square = photo[:, 100:500].astype(np.float32) / 255
    pillow = np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(square[..., c])).resize(
        (32, 32), Image.Resampling.BILINEAR)) for c in range(3)], axis=-1)
    np.testing.assert_allclose(fit_image(photo, 32), pillow, atol=1e-5)
    assert np.array_equal(fit_image(photo[:, 100:500], 400), square)  # already the size: untouched
    assert fit_image(photo[..., 0], 32).shape == (32, 32)


def test_save_image_writes_an_8_bit_png_that_loads_back(tmp_path):
    image = fit_image(load_image("skimage:astronaut"), 32)
    path = tmp_path / "new" / "edited.png"
    save_image(image, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.array_equal(load_image(str(path)), (image * 255).round().astype(np.uint8))


def test_grey_with_alpha_and_cmyk_files_load_as_rgb(tmp_path):
    from PIL import Image

    Image.new("LA", (5, 4), (90, 10)).save(tmp_path / "la.png")
    Image.new("CMYK", (5, 4), (0, 255, 255, 0)).save(tmp_path / "red.jpg")
    assert np.array_equal(load_image(str(tmp_path / "la.png")), np.full((4, 5, 3), 90, np.uint8))
    red = load_image(str(tmp_path / "red.jpg"))
    assert red.shape == (4, 5, 3) and red[..., 0].min() > 200 and red[..., 1:].max() < 60


def test_bundled_images_without_scikit_image_are_a_one_line_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "skimage" else real(name, *a))
    for call in (load_image, check_image):
        with pytest.raises(ImageError, match=r"^skimage:coffee: bundled sample images need scikit-image") as info:
            call("skimage:coffee")
        assert "cluster extra" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ImageError, match="unknown bundled image"):
        load_image("skimage:nope")


def test_bad_image_references(tmp_path):
    with pytest.raises(ImageError):
        load_image("skimage:../../etc/passwd")
    with pytest.raises(ImageError):
        load_image(str(tmp_path / "missing.png"))
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not an image")
    with pytest.raises(ImageError):
        load_image(str(junk))


@pytest.mark.parametrize("index", ["\u00b2", "\u0661", "+1", "-1", "07", "1.0", "200", "9999", ""])
def test_an_lfw_index_is_canonical_ascii_below_the_subsets_size(index):
    """str.isdigit() took a superscript 2, and int() then raised a bare ValueError."""
    with pytest.raises(ImageError, match="unknown bundled image"):
        load_image(f"skimage:lfw_subset/{index}")


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

    files = (("rgb.png", "skimage:astronaut"), ("gray.png", "skimage:camera"), ("photo.jpg", "skimage:coffee"))
    for name, ref in files:
        skio.imsave(tmp_path / name, load_image(ref) if name != "gray.png" else load_image(ref)[..., 0],
                    check_contrast=False)
        expected = skio.imread(tmp_path / name)
        expected = np.stack([expected] * 3, axis=-1) if expected.ndim == 2 else expected[..., :3]
        assert np.array_equal(load_image(str(tmp_path / name)), expected)
