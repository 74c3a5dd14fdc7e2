"""Every relative link in README.md and docs/*.md leads to a file of the repository, and every
`#anchor` to a heading of the page it names (anchors as GitHub makes them from headings)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ROOT

#: [text](target) outside code spans; images too
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    out, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for line in prose_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            a = anchor(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            found.add(a if n == 0 else f"{a}-{n}")
    found.update(re.findall(r'<a (?:id|name)="([^"]+)"', path.read_text()))
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_anchor_follows_github():
    assert anchor("`make demo` from a fresh clone") == "make-demo-from-a-fresh-clone"
    assert anchor("headstart's plain step against vLLM's") == "headstarts-plain-step-against-vllms"
    assert anchor("4. Export and publish") == "4-export-and-publish"
    assert anchor("Self-distillation (`headstart distill`)") == "self-distillation-headstart-distill"


def test_every_relative_link_resolves():
    wrong = []
    for page in pages():
        for line in prose_lines(page):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):  # not in code spans
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file, _, fragment = target.partition("#")
                dest = (page.parent / file).resolve() if file else page
                if not dest.exists():
                    wrong.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
                elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                    wrong.append(f"{page.relative_to(ROOT)}: {target} (no such heading in {dest.name})")
    assert not wrong, "broken links:\n" + "\n".join(wrong)

