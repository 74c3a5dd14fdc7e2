from headstart.train.self_instruct import clean_reply, self_instruct


def test_clean_reply():
    assert clean_reply('1. "How do I boil an egg?"\n\nSure!') == "How do I boil an egg?"
    assert clean_reply("Request: Explain tides to a child.") == "Explain tides to a child."
    assert clean_reply("Hi") is None
    assert clean_reply("word " * 200) is None


def test_self_instruct_writes_new_unique_prompts(smol_shaped_target):  # noqa: F811
    seeds = [{"id": f"s{i}", "category": c, "prompt": f"{c} request number {i} about things"} for i, c in enumerate(["chat", "math"] * 4)]
    rows = self_instruct(smol_shaped_target, seeds, n=5, batch_size=8, max_new_tokens=12, progress=False)
    assert 1 <= len(rows) <= 5  # a random tiny model writes noise, but the filters still hold
    prompts = [r["prompt"] for r in rows]
    assert len(set(prompts)) == len(prompts)
    assert not set(prompts) & {s["prompt"] for s in seeds}
    assert all(r["category"] in ("chat", "math") and r["source"] == "self-instruct" for r in rows)
