"""A build or an alias move never switches the model a template's phones need without being told
to (issue 17 item 5): publish leaves latest, set_alias refuses, the API answers 409, and catalog
ls shows the model latest serves."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from sakura.cli import main
from sakura.platform.library import ModelChange, TemplateLibrary
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from tests.helpers import make_builder, make_library, publish


@pytest.fixture(scope="module")
def two_models(tmp_path_factory) -> str:
    """``tpl`` v1 built for tiny-sd3 (latest), v2 for tiny-flux."""
    uri = f"file://{tmp_path_factory.mktemp('models')}/lib"
    library = make_library(uri, ["skimage:brick"], model="tiny-sd3")
    publish(library, make_builder("tiny-flux"), uri, "tpl", "skimage:grass")
    return uri


def test_a_build_for_another_model_does_not_move_latest(two_models):
    library = TemplateLibrary.open(two_models)
    assert library.versions("tpl") == [1, 2] and library.resolve("tpl", "latest") == 1
    assert not library.same_model("tpl", 1, 2)


def test_moving_an_alias_across_models_takes_an_explicit_allow(two_models, tmp_path, capsys):
    import shutil

    root = shutil.copytree(two_models.removeprefix("file://"), tmp_path / "lib")
    uri = f"file://{root}"
    library = TemplateLibrary.open(uri)
    with pytest.raises(ModelChange, match="tiny-sd3.*tiny-flux"):
        library.set_alias("tpl", "latest", 2)
    assert main(["alias", "set", "tpl", "latest", "2", "--store", uri]) == 1
    assert "--allow-model-change" in capsys.readouterr().err
    assert main(["catalog", "ls", "--json", "--store", uri]) == 0
    assert json.loads(capsys.readouterr().out)[0]["model"] == "tiny-sd3"
    client = TestClient(create_api(ServeConfig(store=uri, admin_token="t", alias_ttl_s=0)))
    put = lambda body: client.put("/v1/templates/tpl/aliases/latest", json=body, headers={"Authorization": "Bearer t"})  # noqa: E731
    refused = put({"version": 2})
    assert refused.status_code == 409 and refused.json()["code"] == "model_change"
    assert put({"version": 2, "allow_model_change": True}).status_code == 200
    assert library.resolve("tpl", "latest") == 2
    assert main(["catalog", "ls", "--json", "--store", uri]) == 0
    assert json.loads(capsys.readouterr().out)[0]["model"] == "tiny-flux"
