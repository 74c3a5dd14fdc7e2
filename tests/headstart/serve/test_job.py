"""serve/job.py without an engine: the layouts vLLM serves a head from, the engines that read the corpus
table, and the environment they get (the engine runs are tests/end_to_end/test_vllm.py's)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from headstart.serve.job import (
    ServingError,
    corpus_env,
    corpus_speculative_config,
    hybrid_engine,
    model_folder,
    ngram_speculative_config,
    plain_engine,
    served_layout,
    uses_corpus,
)
from headstart.serve.proposer import ENV


def test_served_layouts():
    eagle3, medusa = SimpleNamespace(kind="eagle3", options={}), SimpleNamespace(kind="medusa", options={})
    assert served_layout(eagle3) == ("eagle3", "eagle3") and served_layout(eagle3, "speculators") == ("speculators", "eagle3")
    assert served_layout(medusa) == ("vllm-medusa", "medusa")
    with pytest.raises(ServingError, match="not 'eagle3'"):
        served_layout(medusa, "eagle3")
    with pytest.raises(ServingError, match="not 'dflash' heads"):
        served_layout(SimpleNamespace(kind="dflash", options={}))


def test_engines_reading_the_corpus_table(tmp_path):
    head = SimpleNamespace(kind="eagle3", options={})
    assert uses_corpus({"name": "c", "speculative_config": corpus_speculative_config(3)})
    assert uses_corpus(hybrid_engine(head, "eagle3", tmp_path, 3))
    assert not uses_corpus(plain_engine()) and not uses_corpus({"name": "n", "speculative_config": ngram_speculative_config(3)})
    assert corpus_env(tmp_path) == {ENV: str(Path(tmp_path).resolve())}  # nothing else: vLLM imports headstart installed
    assert model_folder("some/model") == "some/model"
