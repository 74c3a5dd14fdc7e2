"""headstart in vLLM: every piece of code that serves a head through vLLM or measures it there.

- proposer.py   what vLLM loads in its own environment: the corpus proposer (`custom_class`) and the
                general plugin that drafts headstart's hybrid chains (entry point `vllm.general_plugins`)
- engine.py     the engine runner, run by vLLM's environment's python (`-m headstart.serve.engine`)
- job.py        headstart's side of a run: speculative configs, the job, the subprocess, the export
- prediction.py headstart's prediction of vLLM's acceptance, on its own text and along vLLM's
- check.py      `headstart serve-check`: vLLM's acceptance, output and speed beside headstart's
- server.py     `headstart serve`: the head served by vLLM's OpenAI-compatible server until Ctrl-C or SIGTERM
- load.py       `headstart serve` driven from outside: started, asked by concurrent clients (scripts/bench_serve_load.py)
- bench.py      `scripts/bench_serving.py`: a head at several k beside vLLM plain, n-gram and headstart
- distill_backend.py  vLLM generating the answers of `headstart distill`

Imports run one way: serve sits on the core, decode, heads and eval, and nothing below imports it,
except train/distill.py reaching distill_backend.py (which imports only the core) lazily. vLLM's
environment (`.venv-vllm`, transformers < 5.20) imports engine.py and proposer.py only: they import
nothing of headstart beyond its decode package's lookup and corpus tables. Nothing is imported here.
"""
