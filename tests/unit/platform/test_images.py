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
