"""Every error the phone library raises is an EdgeError, and still the core's type it stands for."""

from __future__ import annotations

import pytest

from sakura.edge_client import EdgeError
from sakura.edge_client.errors import as_edge_error, raises_edge_errors
from sakura.platform.context import ContextError
from sakura.platform.errors import CodecError, ImageError, InvalidTemplateId, ModelError, SakuraError, UnknownModel
from sakura.platform.layout import InvalidName
from sakura.platform.manifest import ManifestError


@pytest.mark.parametrize("core", [ManifestError, ContextError, CodecError, UnknownModel, ModelError, InvalidName,
                                  InvalidTemplateId, ImageError])
def test_a_core_error_leaves_a_public_method_as_an_edge_error_of_its_own_type(core):
    @raises_edge_errors
    def public() -> None:
        raise core("what went wrong")

    with pytest.raises(EdgeError) as err:
        public()
    assert isinstance(err.value, core) and str(err.value) == "what went wrong"
    assert err.value.code != EdgeError.code  # a code that says what it is
    assert isinstance(err.value.__cause__, core)  # the original, for a debugger


def test_an_edge_error_and_a_non_sakura_error_pass_through_unchanged():
    edge = EdgeError("already one")
    assert as_edge_error(edge) is edge

    @raises_edge_errors
    def broken() -> None:
        raise KeyError("a bug, not an input")

    with pytest.raises(KeyError):
        broken()
    assert not isinstance(as_edge_error(SakuraError("x")), type(None))
    assert as_edge_error(SakuraError("x")).code == "sakura_error"
