"""Every route, fuzzed from the OpenAPI schema against a live server: never a 500.

Schemathesis generates valid and invalid requests for each operation (bounded and
derandomized so the run is repeatable and takes well under a minute). Nothing is
excluded: the SSE routes end on their own here (no model is configured, so a chat turn
fails at once; a stream of an unknown call is a 404), and every call has a timeout.

The fuzzer can register a provider at a made-up URL and then start a turn or a
connection test with it, so the server runs with its HTTP proxy set to a closed local
port: nothing it sends leaves the machine (loopback is exempt).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from security_support import free_port, start_server

pytestmark = [pytest.mark.integration, pytest.mark.p1]

_EXAMPLES_PER_OPERATION = 20


def _fuzz(operation: Any, base_url: str, headers: dict[str, str], mode: GenerationMode) -> None:
    @settings(
        max_examples=_EXAMPLES_PER_OPERATION,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(operation.as_strategy(generation_mode=mode))
        response = case.call(base_url=base_url, headers=headers, timeout=15)
        case.validate_response(response, checks=[not_a_server_error])

    run()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    dead_proxy = f"http://127.0.0.1:{free_port()}"
    srv = start_server(
        tmp_path_factory.mktemp("fuzz") / "home",
        HTTP_PROXY=dead_proxy,
        HTTPS_PROXY=dead_proxy,
        ALL_PROXY=dead_proxy,
        NO_PROXY="127.0.0.1,localhost",
        TETHER_LLM_MAX_RETRIES="0",
    )
    try:
        yield srv
    finally:
        srv.close()


def test_no_route_answers_500(server: Any) -> None:
    app_server = server
    headers = {"Authorization": f"Bearer {app_server.token}"}
    schema = schemathesis.openapi.from_url(f"{app_server.base_url}/openapi.json", headers=headers)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:
        _fuzz(operation, app_server.base_url, headers, GenerationMode.POSITIVE)
        # Invalid input only exists where the schema constrains something: a body.
        # Path ids are free-form strings (every string is valid; the perimeter suite
        # sends odd ones), so negative generation there has nothing to produce.
        if list(operation.body):
            _fuzz(operation, app_server.base_url, headers, GenerationMode.NEGATIVE)
    assert app_server.api_request("GET", "/api/healthz").status_code == 200
    assert "Traceback" not in app_server.logs_tail(1_000_000)
