"""The demo's recipe: its outputs, its clock and the command line's say over both."""

from headstart.demo import DEMO_MINUTES, DEMO_RECIPE, _demo_recipe, _summary_line
from tests.helpers import ROOT


def test_the_demo_trains_for_its_own_clock_unless_told_otherwise():
    recipe = str(ROOT / DEMO_RECIPE)
    demo = _demo_recipe(recipe, [], quick=False)
    assert demo.train.max_minutes == DEMO_MINUTES
    assert demo.train.output_dir == "runs/demo/eagle3" and demo.eval.num_prompts == 9
    assert _demo_recipe(recipe, ["train.max_minutes=7"], quick=False).train.max_minutes == 7  # the command line wins
    assert _demo_recipe(recipe, [], quick=True).train.max_minutes == 0.5  # --quick's tiny budget


def test_the_summary_line_gives_the_margin_and_what_the_head_added_on_its_steps():
    methods = [
        {"label": "plain", "speedup": 1.0, "head_gain": None, "acceptance": None},
        {"label": "eagle3+lookup", "speedup": 2.2, "acceptance": {"tau": 3.5},
         "head_gain": {"head_steps": 40, "gained_steps": 9, "lost_steps": 0, "drafts": 12, "tau_without_head": 3.2}},
        {"label": "corpus+lookup", "speedup": 2.0, "acceptance": {"tau": 3.16}, "head_gain": None},
    ]
    report = {"results": [{"temperature": 0.0, "methods": methods,
                           "head_margin": {"with_head": "eagle3+lookup", "without_head": "corpus+lookup", "ratio": 1.1}}]}
    assert _summary_line(report, 700, 15) == (
        "summary: the head's margin over no head 1.10x (eagle3+lookup 2.20x plain, corpus+lookup 2.00x); "
        "on its own steps the head lifted τ 3.20 -> 3.50; the head trained 700 steps in 15 min")
    methods[1]["head_gain"] = None  # a head without a hybrid: no such clause
    assert _summary_line(report, 700, 15).endswith("corpus+lookup 2.00x); the head trained 700 steps in 15 min")
