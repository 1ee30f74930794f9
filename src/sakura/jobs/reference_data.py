"""Training and held-out data for the reference editing model: real images only.

Sources are images that dependencies ship: scikit-image's sample photos, textures and LFW face
subset, and scikit-learn's two sample photos. They are split into train and held-out sets by
source image *before* anything else, so no held-out pixel is ever seen in training.

Each task's target comes from a classical algorithm:

* ``style_transfer``: Reinhard et al. (2001) colour transfer: the user image's per-channel mean
  and standard deviation in CIE Lab are matched to the template's.
* ``try_on``: the template texture replaces a fixed garment region (a feathered torso-shaped
  mask), multiplied by the user image's relative luminance there so its shading survives.
* ``face_swap``: the template face is colour-matched to the user's face inside a feathered
  elliptical face mask (mean/std per channel) and alpha-blended into it.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np

RESOLUTION = 32
TASKS = ("style_transfer", "try_on", "face_swap")

_TRAIN_PHOTOS = ("astronaut", "chelsea", "rocket", "immunohistochemistry", "motorcycle_left", "china", "camera")
_HELD_OUT_PHOTOS = ("coffee", "hubble_deep_field", "retina", "motorcycle_right", "flower")
_TRAIN_TEXTURES = ("grass", "gravel")
_HELD_OUT_TEXTURES = ("brick",)
_FACES = 100  # lfw_subset holds 100 faces, then 100 non-faces
_HELD_OUT_FACES = 20


@dataclass(frozen=True)
class Pool:
    photos: tuple[np.ndarray, ...]
    textures: tuple[np.ndarray, ...]
    faces: np.ndarray  # (n, R, R, 3) float32 in [0, 1]


@dataclass(frozen=True)
class Batch:
    user: np.ndarray  # (B, R, R, 3)
    template: np.ndarray  # (B, R, R, 3)
    target: np.ndarray  # (B, R, R, 3)
    task: np.ndarray  # (B,) task index


@functools.lru_cache(maxsize=2)
def pool(split: str) -> Pool:
    if split not in ("train", "held_out"):
        raise ValueError(f"unknown split {split!r}")
    train = split == "train"
    photos = tuple(_load(n) for n in (_TRAIN_PHOTOS if train else _HELD_OUT_PHOTOS))
    textures = tuple(_load(n) for n in (_TRAIN_TEXTURES if train else _HELD_OUT_TEXTURES))
    faces = _faces()[: _FACES - _HELD_OUT_FACES] if train else _faces()[_FACES - _HELD_OUT_FACES :]
    return Pool(photos, textures + photos, faces)


def sample_batch(split: str, size: int, rng: np.random.Generator, tasks: tuple[str, ...] = TASKS) -> Batch:
    """``size`` (user, template, target) triples, tasks drawn uniformly from ``tasks``."""
    p = pool(split)
    rows = [make_example(p, TASKS.index(tasks[rng.integers(len(tasks))]), rng) for _ in range(size)]
    user, template, target, task = zip(*rows)
    return Batch(np.stack(user), np.stack(template), np.stack(target), np.array(task, dtype=np.int64))


def make_example(p: Pool, task: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    name = TASKS[task]
    if name == "style_transfer":
        user, style = _crop(p.photos, rng), _crop(p.photos, rng)
        return user, style, reinhard_transfer(user, style), task
    if name == "try_on":
        user, texture = _crop(p.photos, rng), _crop(p.textures, rng, min_scale=0.1)
        return user, texture, composite_garment(user, texture), task
    i, j = rng.choice(len(p.faces), size=2, replace=False)
    user, face = _jitter_face(p.faces[i], rng), _jitter_face(p.faces[j], rng)
    return user, face, blend_face(user, face), task


def reinhard_transfer(user: np.ndarray, style: np.ndarray) -> np.ndarray:
    from skimage.color import lab2rgb, rgb2lab

    u, s = rgb2lab(user), rgb2lab(style)
    mu_u, sd_u = u.mean(axis=(0, 1)), u.std(axis=(0, 1)) + 1e-6
    mu_s, sd_s = s.mean(axis=(0, 1)), s.std(axis=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # out-of-gamut colours are clipped below
        rgb = lab2rgb((u - mu_u) / sd_u * sd_s + mu_s)
    return np.clip(rgb, 0.0, 1.0).astype(np.float32)


def composite_garment(user: np.ndarray, texture: np.ndarray) -> np.ndarray:
    mask = garment_mask()[..., None]
    luma = user @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    region = mask[..., 0] > 0.5
    shade = np.clip(luma / max(float(luma[region].mean()), 1e-3), 0.5, 1.5)[..., None]
    return np.clip(mask * texture * shade + (1.0 - mask) * user, 0.0, 1.0).astype(np.float32)


def blend_face(user: np.ndarray, face: np.ndarray) -> np.ndarray:
    mask = face_mask()[..., None]
    inside = mask[..., 0] > 0.5
    mu_u, sd_u = user[inside].mean(axis=0), user[inside].std(axis=0)
    mu_f, sd_f = face[inside].mean(axis=0), face[inside].std(axis=0) + 1e-6
    matched = (face - mu_f) / sd_f * sd_u + mu_u
    return np.clip(mask * matched + (1.0 - mask) * user, 0.0, 1.0).astype(np.float32)


@functools.lru_cache(maxsize=1)
def garment_mask() -> np.ndarray:
    """A feathered torso: the lower-middle of the frame with rounded shoulders."""
    y, x = np.mgrid[0:RESOLUTION, 0:RESOLUTION].astype(np.float32) / (RESOLUTION - 1)
    body = (np.abs(x - 0.5) < 0.3) & (y > 0.45)
    shoulders = ((x - 0.5) / 0.3) ** 2 + ((y - 0.55) / 0.15) ** 2 < 1.0
    return _feather((body | shoulders).astype(np.float32))


@functools.lru_cache(maxsize=1)
def face_mask() -> np.ndarray:
    y, x = np.mgrid[0:RESOLUTION, 0:RESOLUTION].astype(np.float32) / (RESOLUTION - 1)
    return _feather((((x - 0.5) / 0.3) ** 2 + ((y - 0.5) / 0.38) ** 2 < 1.0).astype(np.float32))


def _feather(mask: np.ndarray) -> np.ndarray:
    from scipy.ndimage import gaussian_filter

    return np.clip(gaussian_filter(mask, sigma=1.0), 0.0, 1.0).astype(np.float32)


def _crop(images: tuple[np.ndarray, ...], rng: np.random.Generator, min_scale: float = 0.15) -> np.ndarray:
    from skimage.transform import resize

    img = images[rng.integers(len(images))]
    h, w = img.shape[:2]
    side = int(min(h, w) * rng.uniform(min_scale, 1.0))
    side = max(side, RESOLUTION)
    top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
    out = resize(img[top : top + side, left : left + side], (RESOLUTION, RESOLUTION), anti_aliasing=True)
    if rng.random() < 0.5:
        out = out[:, ::-1]
    return np.ascontiguousarray(out, dtype=np.float32)


def _jitter_face(face: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A face with a small random tint and flip: LFW is greyscale, users are not."""
    tint = rng.uniform(0.8, 1.2, size=3).astype(np.float32)
    out = np.clip(face * tint, 0.0, 1.0)
    return np.ascontiguousarray(out[:, ::-1] if rng.random() < 0.5 else out)


def _load(name: str) -> np.ndarray:
    from skimage import data

    if name in ("china", "flower"):
        from sklearn.datasets import load_sample_image

        img = load_sample_image(f"{name}.jpg")
    elif name.startswith("motorcycle"):
        left, right, _ = data.stereo_motorcycle()
        img = left if name.endswith("left") else right
    else:
        img = getattr(data, name)()
    img = np.asarray(img)
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    img = img[..., :3]
    img = (img.astype(np.float32) / 255.0) if img.dtype == np.uint8 else img.astype(np.float32)
    return _shrink(img, _MAX_SIDE)


_MAX_SIDE = 192  # photos are shrunk once so that crops resize cheaply


def _shrink(img: np.ndarray, side: int) -> np.ndarray:
    from skimage.transform import rescale

    factor = side / min(img.shape[:2])
    if factor >= 1.0:
        return img
    return rescale(img, factor, channel_axis=2, anti_aliasing=True).astype(np.float32)


def _faces() -> np.ndarray:
    from skimage import data
    from skimage.transform import resize

    faces = data.lfw_subset()[:_FACES]
    up = np.stack([resize(f, (RESOLUTION, RESOLUTION), anti_aliasing=False) for f in faces])
    return np.repeat(up[..., None], 3, axis=-1).astype(np.float32)
