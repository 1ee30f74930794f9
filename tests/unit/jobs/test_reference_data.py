"""Reference-model data: real images only, split before use, targets from documented algorithms."""

from __future__ import annotations

import numpy as np
import pytest

from sakura.jobs import reference_data as data


def test_train_and_held_out_sources_are_disjoint():
    assert not set(data._TRAIN_PHOTOS) & set(data._HELD_OUT_PHOTOS)
    assert not set(data._TRAIN_TEXTURES) & set(data._HELD_OUT_TEXTURES)
    train, held = data.pool("train"), data.pool("held_out")
    assert len(train.faces) == 80 and len(held.faces) == 20
    flat_train = {f.tobytes() for f in train.faces}
    assert not any(f.tobytes() in flat_train for f in held.faces)


@pytest.mark.parametrize("task", data.TASKS)
def test_batches_are_deterministic_images_in_unit_range(task):
    a = data.sample_batch("held_out", 3, np.random.default_rng(5), tasks=(task,))
    b = data.sample_batch("held_out", 3, np.random.default_rng(5), tasks=(task,))
    np.testing.assert_array_equal(a.target, b.target)
    for arr in (a.user, a.template, a.target):
        assert arr.shape == (3, 32, 32, 3) and arr.min() >= 0.0 and arr.max() <= 1.0
    assert (a.task == data.TASKS.index(task)).all()
    assert not np.allclose(a.target, a.user)  # every task changes the image


def test_try_on_and_face_swap_keep_the_user_image_outside_their_masks():
    rng = np.random.default_rng(0)
    user, texture = rng.random((32, 32, 3), np.float32), rng.random((32, 32, 3), np.float32)
    outside = data.garment_mask() < 1e-3
    np.testing.assert_allclose(data.composite_garment(user, texture)[outside], user[outside], atol=1e-3)
    outside = data.face_mask() < 1e-3
    np.testing.assert_allclose(data.blend_face(user, texture)[outside], user[outside], atol=1e-3)


def test_style_transfer_matches_the_template_colour_statistics():
    from skimage.color import rgb2lab

    batch = data.sample_batch("held_out", 1, np.random.default_rng(2), tasks=("style_transfer",))
    out, style, user = (rgb2lab(x[0]).mean(axis=(0, 1)) for x in (batch.target, batch.template, batch.user))
    # Gamut clipping moves the result a little; it still lands far closer to the style than the user was.
    assert np.linalg.norm(out - style) < 0.3 * np.linalg.norm(user - style)
