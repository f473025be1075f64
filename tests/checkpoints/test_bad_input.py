"""Bad checkpoints get one clear error naming the file, tensor or field."""

import json

import numpy as np
import pytest

from memjax.checkpoints import load_model
from memjax.checkpoints.decoder_io import CheckpointError, load_hf_decoder
from memjax.checkpoints.safetensors_io import SafetensorsCheckpoint, write_safetensors
from memjax.models.config import ConfigError
from tests.models.hf_fixtures import make_hf_model


@pytest.fixture
def checkpoint(tmp_path):
    make_hf_model("llama").save_pretrained(tmp_path / "ckpt")
    return tmp_path / "ckpt"


def _rewrite(checkpoint, edit):
    src = SafetensorsCheckpoint(checkpoint)
    tensors = {k: np.array(src.get(k)) for k in src.keys()}
    edit(tensors)
    write_safetensors(checkpoint / "model.safetensors", tensors)


def test_missing_directory_and_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        load_hf_decoder(tmp_path / "does_not_exist")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_hf_decoder(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        load_model(str(tmp_path / "does_not_exist"))


def test_missing_weights_file(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        load_hf_decoder(checkpoint)


def test_unsupported_architecture(checkpoint):
    cfg = json.loads((checkpoint / "config.json").read_text())
    cfg["model_type"] = "gpt2"
    (checkpoint / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=r"config\.json.*'gpt2'.*not supported"):
        load_hf_decoder(checkpoint)


def test_missing_config_field(checkpoint):
    cfg = json.loads((checkpoint / "config.json").read_text())
    del cfg["hidden_size"]
    (checkpoint / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="hidden_size"):
        load_hf_decoder(checkpoint)


def test_missing_tensor_is_named(checkpoint):
    _rewrite(checkpoint, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"model\.layers\.1\.mlp\.up_proj\.weight.*missing"):
        load_hf_decoder(checkpoint)


def test_wrong_shape_is_named(checkpoint):
    def shrink(t):
        t["model.layers.0.self_attn.k_proj.weight"] = t["model.layers.0.self_attn.k_proj.weight"][
            :-1
        ]

    _rewrite(checkpoint, shrink)
    with pytest.raises(
        CheckpointError, match=r"k_proj\.weight.*shape \(31, 64\), expected \(32, 64\)"
    ):
        load_hf_decoder(checkpoint)


def test_sharded_checkpoint_with_index(tmp_path):
    model = make_hf_model("qwen2_tied")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    params, cfg = load_hf_decoder(tmp_path / "sharded")
    np.testing.assert_allclose(
        np.asarray(params["embed"]), model.model.embed_tokens.weight.detach().numpy(), atol=0
    )
    shards = sorted((tmp_path / "sharded").glob("model-*.safetensors"))
    shards[-1].unlink()
    with pytest.raises(FileNotFoundError, match="missing shard"):
        load_hf_decoder(tmp_path / "sharded")
