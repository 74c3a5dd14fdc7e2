"""Imports run one way between the package's folders (docs/architecture.md, "Import rules").

The core (config, target, adapter, files ...) at the bottom; heads on it and on the decoding
engine's tree and cache types; the decoding loop knows heads only through the `DraftHead` protocol;
train on heads and the core, never on decode; eval on decode and heads, never on train; serve
(headstart/serve/, everything of vLLM) on eval, decode, heads and the core, never on train, and
imported by none of them: train's distillation alone reaches its vLLM backend (`LATERAL`), which
imports only the core and serve's modules that import only the core; the CLI, the demo and the recipe
loader on top. Every import counts, those inside functions
too (a lazy import still runs).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT, adapted_head

#: folder -> the package its modules are imported as (pyproject's package-dir)
PACKAGES = {"headstart": "headstart", "heads": "headstart.heads", "train": "headstart.train", "eval": "headstart.eval"}
#: modules above every folder: the CLI, the demo it runs, `python -m headstart`, the lazy public API
#: (`headstart/__init__.py` names its modules as strings, imported on first use) and the recipe loader
#: with every part (headstart/recipe.py: the head kinds' options and joint training, owned above the core)
TOP = {"headstart", "headstart.__main__", "headstart.cli", "headstart.demo", "headstart.recipe"}
#: layer -> the layers its modules may import (besides their own)
ALLOWED = {
    "core": set(),
    "decode": {"core"},
    "heads": {"core", "decode"},
    "train": {"core", "heads"},
    "eval": {"core", "decode", "heads"},
    "serve": {"core", "decode", "heads", "eval"},
    "top": {"core", "decode", "heads", "train", "eval", "serve"},
}
#: the imports allowed against the layers, each made inside a function: train's distillation generating
#: with vLLM (`distill.backend: vllm`) reaches serve's vLLM backend, a module that imports only the core
#: (and serve/worker.py, itself only on the core)
LATERAL = {("headstart.train.distill", "headstart.serve.distill_backend")}


def module_files() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


def layer(module: str) -> str:
    """The layer of a dotted module name of the package."""
    if module in TOP:
        return "top"
    for prefix, name in (("headstart.decode", "decode"), ("headstart.heads", "heads"), ("headstart.train", "train"),
                         ("headstart.eval", "eval"), ("headstart.serve", "serve")):
        if module == prefix or module.startswith(prefix + "."):
            return name
    return "core"


def imported_modules(path: Path, known: set[str], module_level: bool = False) -> set[str]:
    """The package's modules that `path` imports anywhere in it (module level or inside functions;
    only the statements at module level with `module_level`, the imports that run when it is imported);
    `from headstart import heads` names the submodule `headstart.heads`."""
    out = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body if module_level else ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names}
            out.update(subs & known or {node.module})
    return {m for m in out if m == "headstart" or m.startswith("headstart.")}


def folder_edges(lateral: bool = True) -> dict[tuple[str, str], list[str]]:
    """(importing layer, imported layer) -> the imports that make that edge, as 'module -> module'
    (without the `LATERAL` ones unless `lateral`)."""
    files = module_files()
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in files.items():
        for imported in imported_modules(path, set(files)):
            a, b = layer(name), layer(imported)
            if a != b and (lateral or (name, imported) not in LATERAL):
                edges.setdefault((a, b), []).append(f"{name} -> {imported}")
    return edges


def private_imports(path: Path, package: str) -> list[str]:
    """The private (_underscore, not dunder) names of other modules of `package` that `path` uses:
    imported by name (`from package.mod import _f`, relative imports too), or read as an attribute of
    an imported module (`from package import mod` ... `mod._f`)."""
    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    tree = ast.parse(path.read_text(), filename=str(path))
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = "." * node.level + (node.module or "")
            if node.level or source == package or source.startswith(package + "."):
                found += [f"{source}.{a.name}" for a in node.names if private(a.name)]
                modules.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.asname and a.name.startswith(package + "."))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in modules and private(node.attr):
                found.append(f"{node.value.id}.{node.attr}")
    return found


def kind_imports(kind_module: str, files: dict[str, Path]) -> set[str]:
    """The package's modules a head kind's module depends on: those it imports anywhere, then, through
    them, every module their module-level imports load. (Not through their lazy imports: saving goes
    through heads/checkpoint.py, which reaches every kind through the registry on purpose.)"""
    known = set(files)
    found, todo = set(), sorted(imported_modules(files[kind_module], known))
    while todo:
        name = todo.pop()
        if name in found or name not in files:
            continue
        found.add(name)
        todo += sorted(imported_modules(files[name], known, module_level=True))
    return found


def cycle(edges) -> list[str] | None:
    """A circle in the graph of layers (as a list of layers), or None."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)

    def walk(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        for nxt in sorted(graph.get(node, ())):
            found = walk(nxt, path + [node])
            if found:
                return found
        return None

    return next((c for c in (walk(n, []) for n in sorted(graph)) if c), None)


def test_the_checker_sees_every_import_form(tmp_path):
    """Module-level, function-level, `import a.b as c` and `from package import submodule`."""
    source = tmp_path / "m.py"
    source.write_text(
        "import headstart.heads as registry\n"
        "from headstart import heads\n"
        "from headstart.config import load_recipe\n"
        "import torch\n"
        "def f():\n"
        "    from headstart.train import joint\n"
        "    import headstart.eval.run\n"
    )
    known = {"headstart.heads", "headstart.train.joint", "headstart.config", "headstart.eval.run"}
    assert imported_modules(source, known) == {
        "headstart.heads", "headstart.config", "headstart.train.joint", "headstart.eval.run",
    }
    assert imported_modules(source, known, module_level=True) == {"headstart.heads", "headstart.config"}
    assert cycle({("heads", "train"), ("train", "heads")}) == ["heads", "train", "heads"]
    assert cycle({("train", "heads"), ("heads", "core")}) is None
    assert layer("headstart.decode.tree") == "decode" and layer("headstart.adapter") == "core"
    assert layer("headstart.cli") == "top" and layer("headstart.heads") == "heads"
    assert layer("headstart.serve.check") == "serve" and layer("headstart.serve") == "serve"


def test_the_private_name_checker_sees_every_form(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from headstart.heads.export import _layout, export\n"
        "from headstart.heads import layout_medusa\n"
        "import headstart.heads.reading as reading\n"
        "from . import checkpoint\n"
        "from headstart.heads.checkpoint import load_heads as _load\n"
        "from headstart.files import _remove\n"
        "def f():\n"
        "    from .layout import _hidden\n"
        "    return layout_medusa._target_rows, reading._x, checkpoint._download, layout_medusa.__name__\n"
    )
    assert sorted(private_imports(source, "headstart.heads")) == [
        ".layout._hidden", "checkpoint._download", "headstart.heads.export._layout",
        "layout_medusa._target_rows", "reading._x",
    ]


def test_heads_modules_share_only_public_names():
    """What modules of heads/ share is public and lives in the module that owns it (heads/reading.py,
    heads/layout.py ...): no module reaches for another's private helpers."""
    files = {name: path for name, path in module_files().items() if layer(name) == "heads"}
    assert "headstart.heads.export" in files and "headstart.heads.layout_medusa" in files
    found = {name: private_imports(path, "headstart.heads") for name, path in files.items()}
    found = {name: names for name, names in found.items() if names}
    assert not found, f"private names of sibling modules used in heads/: {found}"


def test_head_kinds_share_helpers_through_their_own_modules():
    """No head kind's module imports another kind's: what kinds share lives in modules of its own
    (heads/vocab.py the draft vocabulary, heads/feature_head.py the base of EAGLE and EAGLE-3,
    heads/losses.py the token losses and the simulated τ), not in a sibling kind."""
    from headstart.heads import REGISTRY

    files = module_files()
    kinds = {cls.__module__ for cls in REGISTRY.values()}
    assert kinds == {"headstart.heads.medusa", "headstart.heads.eagle", "headstart.heads.eagle3", "headstart.heads.dflash"}
    eagle3 = kind_imports("headstart.heads.eagle3", files)
    assert {"headstart.heads.vocab", "headstart.heads.feature_head", "headstart.heads.drafting"} <= eagle3
    assert "headstart.heads.eagle" not in eagle3 and "headstart.heads.medusa" not in eagle3
    found = {kind: sorted(kind_imports(kind, files) & (kinds - {kind})) for kind in sorted(kinds)}
    assert not any(found.values()), f"head kinds importing other kinds' modules: {found}"


def test_no_import_circle_between_folders():
    edges = folder_edges()
    assert ("heads", "decode") in edges and ("train", "heads") in edges  # the checker sees the real graph
    found = cycle(edges)
    assert found is None, f"import circle between folders {' -> '.join(found)}: " + "; ".join(
        edges[pair][0] for pair in zip(found, found[1:])
    )


def test_imports_follow_the_layers():
    wrong = {pair: imports for pair, imports in folder_edges(lateral=False).items() if pair[1] not in ALLOWED[pair[0]]}
    assert not wrong, "imports against the layers' direction (docs/architecture.md): " + "; ".join(
        f"{a} may not import {b} ({', '.join(imports)})" for (a, b), imports in sorted(wrong.items())
    )


def test_heads_and_decode_never_import_training_code():
    edges = folder_edges()
    assert not edges.get(("heads", "train")) and not edges.get(("decode", "train")) and not edges.get(("serve", "train"))


def test_serving_is_imported_from_above_only():
    """Nothing below serve imports it, but for the `LATERAL` imports: each made inside a function, of a
    module that imports nothing above the core but serve's modules that import only the core, so training
    reaches no more of headstart through it."""
    files = module_files()
    below = {(a, b): imports for (a, b), imports in folder_edges().items() if b == "serve" and a != "top"}
    assert set(below) == {("train", "serve")}, below  # the checker sees the lateral import
    assert {tuple(i.split(" -> ")) for imports in below.values() for i in imports} == LATERAL
    for importer, imported in LATERAL:
        assert imported not in imported_modules(files[importer], set(files), module_level=True), f"{importer}: import {imported} lazily"
        reached = imported_modules(files[imported], set(files))
        assert {layer(m) for m in reached} <= {"core", "serve"}, imported
        for m in reached - {imported}:
            assert layer(m) == "core" or {layer(n) for n in imported_modules(files[m], set(files))} <= {"core"}, (imported, m)


def test_vllm_environment_imports_only_the_decode_tables():
    """What vLLM's environment imports of headstart (its own transformers, no headstart dependency installed):
    the engine runner nothing, the proposer and plugin only decode's lookup and corpus modules (and what they import)
    and the learning table (serve/learn.py, on the corpus module and what it imports); the served-chat log
    (vLLM's middleware) nothing."""
    files = module_files()
    assert imported_modules(files["headstart.serve.engine"], set(files)) == set()
    assert imported_modules(files["headstart.serve.served_log"], set(files)) == set()
    assert imported_modules(files["headstart.serve.proposer"], set(files)) == {"headstart.decode.corpus", "headstart.decode.lookup",
                                                                               "headstart.serve.learn"}
    corpus = imported_modules(files["headstart.decode.corpus"], set(files))
    assert imported_modules(files["headstart.serve.learn"], set(files)) <= {"headstart.decode.corpus", *corpus}


def test_loading_a_medusa2_head_runs_no_training_code(tmp_path):
    """A head with its LoRA adapter loads and decodes in a process that never imports headstart.train."""
    adapted_head(tmp_path / "h")
    script = (
        "import json, sys, torch\n"
        "import headstart as hs\n"
        "from tests.helpers import tiny_target\n"
        "target = tiny_target('llama')\n"
        f"head = hs.load_heads({str(tmp_path / 'h')!r}, target=target)\n"
        "out = hs.SpeculativeGenerator(target, head).generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4)\n"
        "print(json.dumps({'adapter': target.adapter is not None, 'new': out.sequences.shape[1] - 3,\n"
        "                  'train': sorted(m for m in sys.modules if m.startswith('headstart.train'))}))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1]) == {"adapter": True, "new": 4, "train": []}


#: test folder -> the package folder whose modules its files are named after
MIRRORS = {"headstart": "headstart", "headstart/decode": "headstart/decode", "headstart/serve": "headstart/serve", "heads": "heads",
           "train": "train", "eval": "eval", "scripts": "scripts"}
#: test folders with no module of their own: whole flows (decoding loops, the embedded model, the served engine)
END_TO_END = {"end_to_end"}


def test_the_tests_mirror_the_package():
    """tests/<folder>/test_<module>[_<topic>].py tests <folder>/<module>.py; whole flows live in tests/end_to_end;
    test files share helpers through tests/helpers.py, never by importing one another."""
    tests = ROOT / "tests"
    wrong = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests).as_posix()
        if folder == ".":
            if path.name not in ("test_layering.py", "test_docs.py"):  # the tests of the whole tree
                wrong.append(f"{path.name}: put it in the folder of the module it tests")
            continue
        if folder in END_TO_END:
            continue
        if folder not in MIRRORS:
            wrong.append(f"{folder}/{path.name}: tests/{folder} mirrors no package folder ({', '.join(sorted(MIRRORS))})")
            continue
        modules = {p.stem for p in (ROOT / MIRRORS[folder]).glob("*.py")} - {"__init__"}
        name = path.stem.removeprefix("test_")
        if not any(name == m or name.startswith(m + "_") for m in modules):
            wrong.append(f"{folder}/{path.name}: names no module of {MIRRORS[folder]}/")
        imported = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("tests.") and n.module.split(".")[-1].startswith("test_")]
        wrong += [f"{folder}/{path.name} imports {n.module}: move what it shares to tests/helpers.py" for n in imported]
    for folder in {p.parent for p in tests.rglob("test_*.py")}:
        if not (folder / "__init__.py").exists():
            wrong.append(f"{folder.relative_to(ROOT)} has no __init__.py (test files would be imported by bare name)")
    assert not wrong, "tests that do not mirror the package:\n" + "\n".join(wrong)
