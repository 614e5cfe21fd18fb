"""The GPU benchmarks' copy of the CIFAR recipe (bench/cifar_recipe.py, for a machine without Hydra) is the recipe a
ResNet cell trains with (conf/train/cifar.yaml composed as launch.py composes it)."""

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from bench.cifar_recipe import RECIPE

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_the_benchmarks_train_with_the_cells_recipe():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        train = OmegaConf.to_container(compose(config_name="config", overrides=["model=resnet18"])["train"])
    assert {key: train[key] for key in ("epochs", "batch_size")} == {k: RECIPE[k] for k in ("epochs", "batch_size")}
    assert {key: train["optimizer"][key] for key in RECIPE["optimizer"]} == RECIPE["optimizer"]
    assert train["schedule"]["name"] == RECIPE["schedule"]["name"]
