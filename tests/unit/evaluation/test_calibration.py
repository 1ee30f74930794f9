"""The FLOP compute model (issue 14 item 1): what a block counts, and which cases the
calibration fits and checks. How well the counted FLOPs predict measured seconds is a timing, so
it is measured by ``python bench/calibrate_compute.py`` (errors per block in its JSON), not
asserted here: on this shared 2-core host the same check read -11% to +28% alone and beyond -25%
beside another process, so as a test it failed by the host's state, not the model's.
"""

from __future__ import annotations

import pytest

from sakura.evaluation.calibration import (
    CHECK_CASES,
    FIT_CASE,
    HEAD_DIM,
    BlockCase,
    BlockTime,
    block_flops,
    fit_flops_per_s,
)


def test_three_sizes_of_every_family_none_of_them_fitted():
    assert FIT_CASE not in CHECK_CASES
    for family in HEAD_DIM:
        widths = {c.width for c in CHECK_CASES if c.family == family}
        assert len(widths) >= 3, family


@pytest.mark.parametrize("heads", [2, 4])
def test_counted_flops_include_attention(heads):
    case = BlockCase("flux2", heads, 512, 128)
    n, d = case.tokens, case.width
    # FLUX.2's blocks: 4 d^2 of attention projections and 9 d^2 of SwiGLU MLP per token, then QK^T and AV
    expected = 2 * n * 13 * d**2 + 4 * n**2 * d
    assert block_flops(case) == pytest.approx({"double": expected, "single": expected})


def test_the_throughput_is_fitted_on_the_fit_case_and_errors_are_relative_to_measured():
    fit = [BlockTime(FIT_CASE, "double", 4e9, 2.0), BlockTime(FIT_CASE, "single", 2e9, 1.0)]
    flops_per_s = fit_flops_per_s(fit)
    assert flops_per_s == 2e9
    check = BlockTime(CHECK_CASES[0], "double", 3e9, 2.0)  # predicted 1.5 s for a measured 2 s
    assert check.predicted_s(flops_per_s) == 1.5 and check.error(flops_per_s) == -0.25
