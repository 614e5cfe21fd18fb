"""Per-layer multiplier rules (models.layer_rules) against the networks' layer names (models.layer_names): selectors,
order, presets, every mistake named with what would be right, and the short descriptions the report's labels use."""
import shutil
from pathlib import Path

import pytest

from models.layer_names import am_layer_names
from models.layer_rules import EXACT, RuleError, Setting, changed, describe, resolve, selector_matches, setting

LUTS = Path(__file__).resolve().parents[1] / "data" / "approxtrain-luts"
AM16 = setting("am16")


def names_with(settings, wanted):
    return [name for name, s in settings.items() if s == wanted]


def test_layer_names_without_building():
    assert am_layer_names("lenet300") == ("fc1", "fc2", "predictions")
    assert am_layer_names("lenet5") == ("conv1", "conv2", "fc1", "fc2", "predictions")
    r18, r50 = am_layer_names("resnet18"), am_layer_names("resnet50")
    assert len(r18) == 1 + 8 * 2 + 3 + 1 and len(r50) == 1 + 16 * 3 + 4 + 1  # stem, blocks, shortcuts, classifier
    assert r18[:4] == ("stem_conv", "stage1_block1_conv1", "stage1_block1_conv2", "stage1_block2_conv1")
    assert "stage2_block1_shortcut_conv" in r18 and "stage1_block1_shortcut_conv" not in r18
    assert r50[1] == "stage1_block1_shortcut_conv"  # 64 -> 256 channels: a projection from the first block on
    with pytest.raises(ValueError, match="valid models: lenet300, lenet5, resnet18"):
        am_layer_names("resnet20")


def test_selectors():
    names = am_layer_names("resnet18")
    assert selector_matches("first", names) == ["stem_conv"]
    assert selector_matches("last", names) == ["predictions"]
    assert selector_matches("stage4", names) == [n for n in names if n.startswith("stage4_")]
    assert selector_matches("stage2_block1", names) == ["stage2_block1_shortcut_conv", "stage2_block1_conv1",
                                                        "stage2_block1_conv2"]
    assert selector_matches("*shortcut_conv", names) == [f"stage{s}_block1_shortcut_conv" for s in (2, 3, 4)]
    assert selector_matches("stage1", ["stage10_block1_conv1"]) == []  # a group ends at an underscore
    assert selector_matches("fc*", am_layer_names("lenet5")) == ["fc1", "fc2"]


def test_first_rule_matching_a_layer_decides_it_the_rest_take_the_cell_multiplier():
    rules = [{"match": "stage4_block2", "mult": "acc16"}, {"match": "stage4", "mult": "mit16"},
             {"match": ["first", "last"], "mult": "native"}]
    settings = resolve("resnet18", AM16, rules)
    assert list(settings) == list(am_layer_names("resnet18"))
    assert names_with(settings, setting("acc16")) == ["stage4_block2_conv1", "stage4_block2_conv2"]
    assert names_with(settings, setting("mit16")) == ["stage4_block1_shortcut_conv", "stage4_block1_conv1",
                                                      "stage4_block1_conv2"]
    assert names_with(settings, EXACT) == ["stem_conv", "predictions"]
    assert len(names_with(settings, AM16)) == 21 - 7
    assert describe("resnet18", settings, AM16) == "first,last: native; stage4_block1: mit16; stage4_block2: acc16"


def test_gradient_mode_per_rule_defaults_to_the_cell_one():
    default = setting("am16", exact_gradients=True)
    settings = resolve("lenet5", default, [{"match": "fc*", "mult": "mit16", "exact_gradients": False},
                                           {"match": "conv2", "mult": "mit16"}])
    assert settings["fc1"] == Setting("mit16", None, False) and settings["conv2"] == Setting("mit16", None, True)
    assert settings["conv1"] == default
    assert describe("lenet5", settings, default) == "conv2: mit16; fc1,fc2: mit16 exact_gradients=false"
    assert resolve("lenet5", default, [{"match": "all", "mult": "native", "exact_gradients": True}])["fc1"] == EXACT


def test_presets_keep_first_and_last_exact():
    assert names_with(resolve("lenet5", AM16, keep="first_last"), EXACT) == ["conv1", "predictions"]
    assert names_with(resolve("resnet50", AM16, keep="first"), EXACT) == ["stem_conv"]
    assert names_with(resolve("lenet300", AM16, keep="last"), EXACT) == ["predictions"]
    # a rule agreeing with the preset is no conflict; one for the other layers is applied
    settings = resolve("lenet5", AM16, [{"match": "first", "mult": "native"}, {"match": "fc*", "mult": "mit16"}],
                       keep="first_last")
    assert describe("lenet5", settings, AM16) == "first,last: native; fc1,fc2: mit16"
    assert changed(resolve("lenet5", AM16, [{"match": "conv*", "mult": "am16"}]), AM16) == {}


def test_a_table_per_layer(tmp_path):
    table = shutil.copy(LUTS / "MIT_7.bin", tmp_path / "MIT_7.bin")
    by_key = resolve("lenet300", AM16, [{"match": "fc1", "mult": "lut", "table": str(table)}])
    by_spec = resolve("lenet300", AM16, [{"match": "fc1", "mult": f"lut:{table}"}])
    assert by_key == by_spec and by_key["fc1"].spec == f"lut:{table}" and by_key["fc1"].label == "lut:MIT_7.bin"


@pytest.mark.parametrize(("rules", "keep", "messages"), [
    ([{"match": "stage4", "mult": "mit16"}], None,
     ["rule 1 (stage4 -> mit16): 'stage4' matches no layer of lenet5; lenet5's layers are conv1, conv2, fc1, fc2, "
      "predictions; or first, last, all, or a glob such as *conv*", "python -m models.layer_list lenet5"]),
    ([{"match": "fc1", "mult": "am8"}], None,
     ["rule 1 (fc1 -> am8): unknown multiplier 'am8'; valid choices: native, acc32"]),
    ([], "first_and_last", ["mult.keep='first_and_last' is not a preset; valid presets: first, last, first_last"]),
    ([{"match": "first", "mult": "mit16"}], "first_last",
     ["rule 1 (first -> mit16) gives conv1 mit16, but mult.keep=first_last keeps it exact"]),
    ([{"match": "conv*", "mult": "acc16"}, {"match": "conv1", "mult": "mit16"}], None,
     ["rule 2 (conv1 -> mit16) decides no layer: conv1 already takes rule 1's multiplier (the first rule matching a "
      "layer decides it): put it before rule 1, or drop it"]),
    ([{"match": "fc1", "mult": "lut"}], None, ["mult=lut needs table=FILE"]),
    ([{"match": "fc1", "mult": "acc16", "table": "x.bin"}], None, ["table='x.bin' is for mult=lut or an integer mode"]),
    ([{"layer": "fc1", "mult": "acc16"}], None, ["unknown key layer; a rule has match, mult, table, exact_gradients",
                                                  "match=None must be a selector"]),
    ([{"match": "fc1", "mult": "lut:/nonexistent/T.bin"}], None, ["table '/nonexistent/T.bin'", "does not exist"]),
    ("fc1=acc16", None, ["must be a list of rules"]),
])
def test_mistakes_are_named_with_what_would_be_right(rules, keep, messages):
    with pytest.raises(RuleError) as error:
        resolve("lenet5", AM16, rules, keep)
    for message in messages:
        assert message in str(error.value)


def test_every_mistake_at_once():
    with pytest.raises(RuleError) as error:
        resolve("lenet5", AM16, [{"match": "stage9", "mult": "mit16"}, {"match": "fc1", "mult": "am8"}], keep="both")
    assert len(error.value.problems) == 3
