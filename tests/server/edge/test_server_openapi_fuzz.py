"""Issue 13: Schemathesis over the server's OpenAPI spec, every operation,
with each credential and with none: no server error (5xx) and no answer that
violates the published schema (including the one error shape). A bounded
number of examples per operation keeps it in CI (SHOAL_SCHEMATHESIS_EXAMPLES,
default 12); seeded, so a failure replays."""

import pytest
from tests_helpers import run_schemathesis


@pytest.mark.parametrize("who", ["operator", "shuffler", "none"])
def test_the_server_answers_every_generated_request_within_its_schema(server, who):
    header = {"operator": f"Authorization: Bearer {server.operator}",
              "shuffler": f"Authorization: Bearer {server.shuffler}", "none": None}[who]
    code, log = run_schemathesis(server.url, header)
    assert code == 0, log[-6000:]
    assert "generated" in log
