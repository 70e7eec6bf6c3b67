"""What a provider gets back of a stored message, and how its errors read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from strict_order import request_problems
from tether.llm.capabilities import DEFAULT, capabilities_for
from tether.llm.errors import describe_error
from tether.llm.reply import AssistantReply, RequestedCall
from tether.llm.wire import assistant_message, request_messages, to_wire

SIGNATURE = {"google": {"thought_signature": "sig"}}


def _stored() -> dict:
    reply = AssistantReply(
        text="",
        tool_calls=[RequestedCall("a", "t", "{}", {"extra_content": SIGNATURE})],
        reasoning="because",
        echo={"reasoning_field": "reasoning_content", "origin": "here"},
    )
    return assistant_message(reply, ["call_1"])


def test_the_provider_that_wrote_a_message_gets_its_fields_back_verbatim() -> None:
    sent = to_wire(_stored(), "here", DEFAULT)
    assert sent == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "because",
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "t", "arguments": "{}"},
                "extra_content": SIGNATURE,
            }
        ],
    }
    tool = {"role": "tool", "tool_call_id": "a", "content": "ok"}
    assert (
        request_problems(
            [sent, tool], message_fields=["reasoning_content"], call_fields=["extra_content"]
        )
        == []
    )


def test_another_provider_gets_the_plain_message() -> None:
    sent = to_wire(_stored(), "elsewhere", DEFAULT)
    assert request_problems([sent, {"role": "tool", "tool_call_id": "a", "content": "ok"}]) == []
    assert "reasoning_content" not in sent and "extra_content" not in sent["tool_calls"][0]


def test_capabilities_are_looked_up_by_host() -> None:
    deepseek = capabilities_for("https://api.deepseek.com/v1")
    assert deepseek.reasoning_echo_field == "reasoning_content"
    assert capabilities_for("https://api.openai.com/v1").echo_reasoning is False
    assert capabilities_for("http://127.0.0.1:8000/v1") == DEFAULT
    # DeepSeek wants reasoning_content back even if a gateway labelled it "reasoning".
    message = _stored()
    message["x_echo"]["reasoning_field"] = "reasoning"
    assert to_wire(message, "here", deepseek)["reasoning_content"] == "because"
    assert "reasoning" not in to_wire(message, "here", capabilities_for("https://api.openai.com"))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"error": {"message": "bad thing", "code": 400}}, "bad thing"),
        ([{"error": {"code": 400, "message": "signature missing", "status": "INVALID"}}],
         "signature missing"),
        ({"detail": "no such model"}, "no such model"),
        ({"error": "rate limited"}, "rate limited"),
        ("plain words", "plain words"),
        ({"object": "error", "message": "vllm says no"}, "vllm says no"),
        (None, ""),
        ([], ""),
    ],
)  # fmt: skip
def test_the_provider_message_is_found_in_any_body_shape(body: object, expected: str) -> None:
    assert describe_error(body) == expected


def test_a_long_body_is_cut_to_a_sentence() -> None:
    assert len(describe_error("<html>" + "x" * 5000)) <= 501


def test_a_key_the_provider_quotes_is_masked() -> None:
    """The message is stored with the task, answered by the API and sent to webhooks."""
    body = {"error": {"message": "Incorrect API key provided: sk-bodysecret1234567. See docs"}}
    described = describe_error(body)
    assert "sk-bodysecret1234567" not in described
    assert described.startswith("Incorrect API key provided: ")


def test_reasoning_goes_back_for_the_current_turn_only_by_default() -> None:
    tool = {"role": "tool", "tool_call_id": "a", "content": "ok"}
    earlier, current = _stored(), _stored()
    current["tool_calls"][0]["id"] = "b"
    history = [
        {"role": "user", "content": "one"},
        earlier,
        tool,
        {"role": "user", "content": "two"},
        current,
        {**tool, "tool_call_id": "b"},
    ]
    sent = request_messages(history, "here", DEFAULT)
    assert "reasoning_content" not in sent[1] and sent[4]["reasoning_content"] == "because"
    # Signatures go back everywhere: they are small and checked where present.
    assert sent[1]["tool_calls"][0]["extra_content"] == SIGNATURE
    whole = request_messages(history, "here", replace(DEFAULT, reasoning_echo_scope="history"))
    assert whole[1]["reasoning_content"] == "because"
