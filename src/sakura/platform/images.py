"""Loading template and request images: files on disk, or sample images that scikit-image ships.

A reference ``skimage:NAME`` names one of scikit-image's bundled sample images (``astronaut``,
``brick``, ``coffee``...) and ``skimage:lfw_subset/I`` the I-th image of its LFW subset (0-99
are faces), so examples and tests use real photos without any download.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sakura.platform.errors import ImageError

SKIMAGE_SCHEME = "skimage:"
# Sample images that scikit-image ships inside its wheel (others would be downloaded).
BUNDLED_SKIMAGE = frozenset({
    "astronaut", "brick", "camera", "cat", "chelsea", "coffee", "coins", "colorwheel", "grass",
    "gravel", "horse", "hubble_deep_field", "immunohistochemistry", "logo", "moon", "page",
    "retina", "rocket", "text",
})


LFW_PREFIX = "lfw_subset/"
LFW_COUNT = 200


def image_ref_exists(ref: str, base_dir: Path | None = None) -> bool:
    if ref.startswith(SKIMAGE_SCHEME):
        name = ref[len(SKIMAGE_SCHEME):]
        return name in BUNDLED_SKIMAGE or _lfw_index(name) is not None
    return _resolve(ref, base_dir).is_file()


def image_bytes_identity(ref: str, base_dir: Path | None = None) -> bytes:
    """Bytes that identify an image's content (for content hashes)."""
    if ref.startswith(SKIMAGE_SCHEME):
        return np.ascontiguousarray(load_image(ref)).tobytes()
    return _resolve(ref, base_dir).read_bytes()


def load_image(ref: str, base_dir: Path | None = None) -> np.ndarray:
    """Load an image as an HxWx3 uint8 array."""
    if ref.startswith(SKIMAGE_SCHEME):
        arr = _load_skimage(ref[len(SKIMAGE_SCHEME):])
    else:
        path = _resolve(ref, base_dir)
        if not path.is_file():
            raise ImageError(f"image file not found: {path}")
        from skimage import io

        try:
            arr = io.imread(path)
        except Exception as exc:  # imageio raises many types for unreadable files
            raise ImageError(f"cannot read image {path}: {exc}") from exc
    return _as_rgb_uint8(np.asarray(arr), ref)


def fit_image(image: np.ndarray, resolution: int) -> np.ndarray:
    """Centre-crop to a square and resize to ``resolution``; float32 in [0, 1]."""
    from skimage.transform import resize

    arr = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else image.astype(np.float32)
    h, w = arr.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    arr = arr[top : top + side, left : left + side]
    out = resize(arr, (resolution, resolution), anti_aliasing=side > resolution, preserve_range=True)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _lfw_index(name: str) -> int | None:
    if not name.startswith(LFW_PREFIX):
        return None
    digits = name[len(LFW_PREFIX):]
    if not digits.isdigit() or len(digits) > 3 or int(digits) >= LFW_COUNT:
        return None
    return int(digits)


def save_image(image: np.ndarray, path: str | Path) -> None:
    """Write an HxWx3 image with values in [0, 1] as an 8-bit PNG (parent folders created)."""
    from skimage.io import imsave

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    imsave(str(path), (np.clip(image, 0.0, 1.0) * 255).round().astype(np.uint8), check_contrast=False)


def save_grid(rows: list[list[np.ndarray]], path: str | Path, scale: int = 4, pad: int = 2) -> None:
    """Write images (HxWx3 in [0, 1]) as a PNG grid, each pixel ``scale`` times larger."""
    tiles = [[np.kron(np.clip(img, 0.0, 1.0), np.ones((scale, scale, 1))) for img in row] for row in rows]
    h, w = tiles[0][0].shape[:2]
    canvas = np.ones((len(rows) * (h + pad) + pad, max(map(len, rows)) * (w + pad) + pad, 3))
    for r, row in enumerate(tiles):
        for c, tile in enumerate(row):
            top, left = pad + r * (h + pad), pad + c * (w + pad)
            canvas[top : top + h, left : left + w] = tile
    save_image(canvas, path)


def _load_skimage(name: str) -> np.ndarray:
    index = _lfw_index(name)
    if index is not None:
        from skimage import data

        return data.lfw_subset()[index]
    if name not in BUNDLED_SKIMAGE:
        raise ImageError(f"unknown bundled image {SKIMAGE_SCHEME}{name}; choose one of {sorted(BUNDLED_SKIMAGE)}")
    from skimage import data

    return getattr(data, name)()


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
