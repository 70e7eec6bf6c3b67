"""What differs between OpenAI-compatible providers, kept as data (pure).

Every provider gets the same client; where one needs something the others must not get,
the difference is a field here, looked up by the endpoint's host, rather than a branch
in the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Capabilities:
    """A provider's dialect, as far as Tether must know it."""

    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    """Delta fields that carry reasoning text, in order of preference."""

    echo_reasoning: bool = True
    """Send an assistant message's reasoning back with it (to the provider that wrote it)."""

    reasoning_echo_field: str | None = None
    """The field reasoning is sent back in; None: the field it arrived in."""

    reasoning_echo_scope: Literal["turn", "history"] = "turn"
    """Which messages get their reasoning back: those after the last user message (what
    reasoning models need to carry on a tool loop), or the whole history."""

    call_echo_fields: tuple[str, ...] = ("extra_content",)
    """Per-call fields kept and sent back verbatim (Gemini's thought signatures)."""


DEFAULT = Capabilities()

# Hosts whose needs are known. Anything else gets DEFAULT, which sends back only what the
# same provider sent, in the field it used: harmless for those that ignore it, required
# by those that check it.
_BY_HOST: dict[str, Capabilities] = {
    # DeepSeek's thinking mode answers 400 unless each assistant message that made tool
    # calls comes back with its reasoning_content.
    "api.deepseek.com": Capabilities(reasoning_echo_field="reasoning_content"),
    # OpenAI writes no reasoning text and refuses unknown message fields.
    "api.openai.com": Capabilities(echo_reasoning=False, call_echo_fields=()),
    # Groq validates message fields strictly and has no use for reasoning sent back.
    "api.groq.com": Capabilities(echo_reasoning=False),
}


def capabilities_for(base_url: str) -> Capabilities:
    """The capabilities of the provider at ``base_url`` (DEFAULT when it is not known)."""
    host = (urlsplit(base_url).hostname or "").lower()
    for known, caps in _BY_HOST.items():
        if host == known or host.endswith("." + known):
            return caps
    return DEFAULT
