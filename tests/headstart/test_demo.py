"""The demo's recipe: its outputs, its clock and the command line's say over both."""

from headstart.demo import DEMO_MINUTES, DEMO_RECIPE, _demo_recipe
from tests.helpers import ROOT


def test_the_demo_trains_for_its_own_clock_unless_told_otherwise():
    recipe = str(ROOT / DEMO_RECIPE)
    demo = _demo_recipe(recipe, [], quick=False)
    assert demo.train.max_minutes == DEMO_MINUTES
    assert demo.train.output_dir == "runs/demo/eagle3" and demo.eval.num_prompts == 9
    assert _demo_recipe(recipe, ["train.max_minutes=7"], quick=False).train.max_minutes == 7  # the command line wins
    assert _demo_recipe(recipe, [], quick=True).train.max_minutes == 0.5  # --quick's tiny budget
