"""A readable view of verification steps (`headstart generate --show-drafts`).

Each step prints the drafts the target accepted, then the draft's best guess that it rejected and
the token the target wrote instead:  `accepted text⟦draft ✗ → target⟧`. With colour, accepted
drafts are green, the rejected draft red and struck through, the target's token yellow; without
colour the brackets carry the same information.
"""

from __future__ import annotations

GREEN, RED, YELLOW, DIM, RESET, STRIKE = "\033[32m", "\033[31m", "\033[33m", "\033[2m", "\033[0m", "\033[9m"


def format_steps(tokenizer, first_token: int, steps: list[dict], color: bool = False) -> str:
    """The answer as a sequence of verification steps (from generate(..., record_steps=True))."""
    def text(ids):
        return tokenizer.decode(ids, skip_special_tokens=False) if ids else ""

    parts = [text([first_token])]
    for s in steps:
        accepted, bonus, rejected = s["accepted"], s["bonus"], s["rejected"]
        acc = text(accepted)
        if color:
            parts.append(f"{GREEN}{acc}{RESET}")
        else:
            parts.append(acc)
        wrote = text([bonus])
        if rejected is None:  # the whole drafted path was accepted: the bonus extends it
            parts.append(f"{YELLOW}{wrote}{RESET}" if color else f"⟦+{wrote}⟧")
        elif color:
            parts.append(f"{RED}{STRIKE}{text([rejected])}{RESET}{YELLOW}{wrote}{RESET}")
        else:
            parts.append(f"⟦{text([rejected])} ✗ → {wrote}⟧")
    legend = (
        f"{DIM}green: accepted drafts · red: rejected draft · yellow: the target's own token{RESET}"
        if color
        else "⟦draft ✗ → target⟧: the draft's rejected guess and the target's token; ⟦+t⟧: bonus after a fully accepted path"
    )
    return "".join(parts) + "\n" + legend
