"""Loading template and request images: files on disk, or sample images that scikit-image ships.

A reference ``skimage:NAME`` names one of scikit-image's bundled sample images (``astronaut``,
``brick``, ``coffee``...) and ``skimage:lfw_subset/I`` the I-th image of its LFW subset (0-99
are faces), so examples and tests use real photos without any download. Only those need
scikit-image (the cluster extra): files are read and written with Pillow and resized with torch,
which is all the phone (the edge extra) installs.

Image files are any format Pillow reads (the first frame of an animated one). Their size is
checked from the header before anything is decoded (:func:`check_image`, the build's preflight,
and :func:`load_image` again on the same open file), so an oversized image is refused without
allocating its pixels.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

from sakura.platform.errors import ImageError
from sakura.platform.layout import parse_number

if TYPE_CHECKING:
    import PIL.Image

SKIMAGE_SCHEME = "skimage:"
# Sample images that scikit-image ships inside its wheel (others would be downloaded).
BUNDLED_SKIMAGE = frozenset({
    "astronaut", "brick", "camera", "cat", "chelsea", "coffee", "coins", "colorwheel", "grass",
    "gravel", "horse", "hubble_deep_field", "immunohistochemistry", "logo", "moon", "page",
    "retina", "rocket", "text",
})


LFW_PREFIX = "lfw_subset/"
LFW_COUNT = 200
#: Largest image (width x height) loaded: 40 MP covers camera photos (a 36 MP full-frame camera
#: shoots 7360x4912); it decodes to 120 MB of 8-bit RGB, and fitting it to the model peaks near 1 GB.
MAX_IMAGE_PIXELS = 40_000_000


def check_image(ref: str, base_dir: Path | None = None, *, max_pixels: int = MAX_IMAGE_PIXELS) -> None:
    """Raise :class:`ImageError` unless ``ref`` is a bundled image or a readable image file under
    ``max_pixels``; reads the file's header only (cheap for big catalogues, nothing decoded)."""
    if ref.startswith(SKIMAGE_SCHEME):
        _skimage_name(ref)
        _require_skimage(ref)
        return
    path = _resolve(ref, base_dir)
    with _open_file(path) as fh:
        _open_checked(fh, path, max_pixels)


def image_size(ref: str, base_dir: Path | None = None) -> tuple[int, int]:
    """(width, height) of a bundled image or an image file (from its header: nothing decoded)."""
    if ref.startswith(SKIMAGE_SCHEME):
        height, width = load_image(ref).shape[:2]
        return width, height
    path = _resolve(ref, base_dir)
    with _open_file(path) as fh:
        size: tuple[int, int] = _open_checked(fh, path, MAX_IMAGE_PIXELS).size
        return size


def image_bytes_identity(ref: str, base_dir: Path | None = None) -> bytes:
    """Bytes that identify an image's content (for content hashes)."""
    if ref.startswith(SKIMAGE_SCHEME):
        return np.ascontiguousarray(load_image(ref)).tobytes()
    return _resolve(ref, base_dir).read_bytes()


def load_image(ref: str, base_dir: Path | None = None, *, max_pixels: int = MAX_IMAGE_PIXELS) -> np.ndarray:
    """Load an image as an HxWx3 uint8 array; :class:`ImageError` (one line, naming the file) if
    it is missing, unreadable, not an image, or over ``max_pixels`` (checked before decoding)."""
    if ref.startswith(SKIMAGE_SCHEME):
        return _as_rgb_uint8(np.asarray(_load_skimage(ref)), ref)
    path = _resolve(ref, base_dir)
    with _open_file(path) as fh:
        image = _open_checked(fh, path, max_pixels)  # decodes the very bytes whose header was checked
        try:
            arr = _decode(image)
        except Exception as exc:  # a decoder fails in many ways on a damaged file
            raise ImageError(f"{path}: cannot decode image: {_one_line(exc)}") from None
    return _as_rgb_uint8(arr, str(path))


#: What a PSNR is reported as for a bit-identical image.
IDENTICAL_DB = 100.0


def psnr_db(ref: np.ndarray, img: np.ndarray) -> float:
    """PSNR of ``img`` against ``ref`` (values in [0, 1]); infinite when they are identical."""
    mse = float(np.mean((np.asarray(ref, np.float64) - np.asarray(img, np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def fit_image(image: np.ndarray, resolution: int) -> np.ndarray:
    """Centre-crop to a square and resize to ``resolution``; float32 in [0, 1].

    Bilinear with antialiasing (a triangle filter as wide as the scale when shrinking, as Pillow
    does), in torch: the phone has it already, and scikit-image with scipy would add 170 MB.
    """
    import torch
    import torch.nn.functional as F

    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    image = image[top : top + side, left : left + side]  # crop first: only the square becomes float
    arr = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else image.astype(np.float32)
    if side != resolution:
        planes = torch.from_numpy(arr if arr.ndim == 3 else arr[..., None]).permute(2, 0, 1)[None]
        planes = F.interpolate(planes, size=(resolution, resolution), mode="bilinear", antialias=True,
                               align_corners=False)
        arr = planes[0].permute(1, 2, 0).numpy().reshape((resolution, resolution, *arr.shape[2:]))
    return np.ascontiguousarray(np.clip(arr, 0.0, 1.0), dtype=np.float32)


def _lfw_index(name: str) -> int | None:
    if not name.startswith(LFW_PREFIX):
        return None
    index = parse_number(name[len(LFW_PREFIX):], max_digits=3)  # not str.isdigit(): int() refuses a superscript 2
    return index if index is not None and index < LFW_COUNT else None


def save_image(image: np.ndarray, path: str | Path) -> None:
    """Write an HxWx3 image with values in [0, 1] as an 8-bit PNG (parent folders created)."""
    from PIL import Image

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((np.clip(image, 0.0, 1.0) * 255).round().astype(np.uint8)).save(path, format="PNG")


def _skimage_name(ref: str) -> str:
    name = ref[len(SKIMAGE_SCHEME):]
    if name not in BUNDLED_SKIMAGE and _lfw_index(name) is None:
        raise ImageError(f"unknown bundled image {ref}; choose one of {sorted(BUNDLED_SKIMAGE)} "
                         f"or {SKIMAGE_SCHEME}{LFW_PREFIX}0..{LFW_COUNT - 1}")
    return name


def _require_skimage(ref: str) -> None:
    if importlib.util.find_spec("skimage") is None:
        raise ImageError(f"{ref}: bundled sample images need scikit-image, which is not installed "
                         "(install the cluster extra: pip install 'sakura-kv[cluster]')")


def _load_skimage(ref: str) -> np.ndarray:
    name = _skimage_name(ref)
    _require_skimage(ref)
    from skimage import data

    index = _lfw_index(name)
    return data.lfw_subset()[index] if index is not None else getattr(data, name)()


def _open_file(path: Path) -> IO[bytes]:
    if not path.is_file():  # a folder, a device or a FIFO is no image (and a FIFO would block)
        raise ImageError(f"image file not found: {path}")
    try:
        return path.open("rb")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise ImageError(f"image file not found: {path}") from None
    except OSError as exc:
        raise ImageError(f"{path}: cannot read image file: {exc.strerror or exc}") from None


def _open_checked(fh: IO[bytes], path: Path, max_pixels: int) -> PIL.Image.Image:
    """Parse the header (Pillow opens lazily) and check the size before anything is decoded."""
    from PIL import Image, UnidentifiedImageError

    limit = f"the limit of {max_pixels / 1e6:g} MP"
    with warnings.catch_warnings():  # Pillow's own, looser bomb check: ours below is stricter
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            image = Image.open(fh)
        except UnidentifiedImageError:
            raise ImageError(f"{path}: not an image in a format Pillow reads (PNG, JPEG, WebP...)") from None
        except Image.DecompressionBombError:  # only raised while Pillow's limit is set
            raise ImageError(f"{path}: more than {2 * (Image.MAX_IMAGE_PIXELS or 0)} pixels, over {limit}") from None
        except Exception as exc:  # a damaged header fails in many ways
            raise ImageError(f"{path}: not a readable image: {_one_line(exc)}") from None
    width, height = image.size
    if width * height > max_pixels:
        raise ImageError(f"{path}: {width}x{height} pixels ({width * height / 1e6:.1f} MP) is over {limit}")
    if width < 1 or height < 1:
        raise ImageError(f"{path}: empty image ({width}x{height})")
    return image


def _decode(image: PIL.Image.Image) -> np.ndarray:
    """The first frame's pixels: 8-bit modes (palette, grey, alpha, CMYK...) as RGB; 16- and 32-bit
    and float ones as they are, for :func:`_as_rgb_uint8` to scale."""
    if image.mode.startswith(("I", "F")):
        return np.asarray(image)
    return np.asarray(image.convert("RGB"))


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:200]


def _resolve(ref: str, base_dir: Path | None) -> Path:
    path = Path(ref).expanduser()
    return path if path.is_absolute() or base_dir is None else base_dir / path


def _as_rgb_uint8(arr: np.ndarray, ref: str) -> np.ndarray:
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4) or min(arr.shape[:2]) < 1:
        raise ImageError(f"image {ref} has unsupported shape {arr.shape}")
    arr = arr[..., :3]
    if arr.dtype != np.uint8:
        scaled = arr.astype(np.float64)
        scaled = scaled / 255.0 if scaled.max() > 1.0 else scaled
        arr = (np.clip(scaled, 0, 1) * 255.0 + 0.5).astype(np.uint8)
    return np.ascontiguousarray(arr)
