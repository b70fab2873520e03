"""The API documents itself offline (issue 16, item 7): Swagger UI and ReDoc
from files served by the server, and bearer security schemes in OpenAPI."""

import pytest
from fastapi.testclient import TestClient

from shoal.server.edge.app import create_app
from shoal.server.edge.settings import Settings


@pytest.fixture
def client(tmp_path):
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/s.db", key_path=f"{tmp_path}/k.pem",
                              operator_token="o" * 20, shuffler_token="s" * 20))
    with TestClient(app) as c:
        yield c


def test_swagger_ui_loads_its_assets_from_the_server_not_a_cdn(client):
    page = client.get("/docs").text
    assert "cdn.jsdelivr.net" not in page and "unpkg.com" not in page
    assert "/static-offline-docs/swagger-ui-bundle.js" in page
    js = client.get("/static-offline-docs/swagger-ui-bundle.js")
    assert js.status_code == 200 and len(js.content) > 100_000
    assert "cdn." not in client.get("/redoc").text


def test_openapi_names_the_operator_and_shuffler_bearer_schemes(client):
    spec = client.get("/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["operator"] == {"type": "http", "scheme": "bearer", "description": schemes["operator"]["description"]}
    assert schemes["shuffler"]["scheme"] == "bearer"
    assert spec["paths"]["/rounds"]["post"]["security"] == [{"operator": []}]
    assert spec["paths"]["/rounds/{round_id}/shuffled"]["post"]["security"] == [{"shuffler": []}]


def test_a_missing_or_wrong_token_keeps_its_status_and_message(client):
    r = client.post("/rounds", json={"k": 2, "dim": 2, "epsilon": 1.0, "n_expected": 100})
    assert r.status_code == 401 and r.json()["detail"] == "missing bearer token"
    r = client.post("/rounds", json={"k": 2, "dim": 2, "epsilon": 1.0, "n_expected": 100},
                    headers={"Authorization": "Bearer " + "s" * 20})
    assert r.status_code == 403 and r.json()["detail"] == "wrong token for this endpoint"


def test_the_result_schema_documents_the_verdict(client):
    spec = client.get("/openapi.json").json()
    quality = spec["components"]["schemas"]["QualityOut"]
    assert set(quality["properties"]["answer"]["enum"]) == {"clusters", "private mean", "mean-only round",
                                                           "unreliable sketch"}
    assert {"verdict", "distinct_centers", "center_errors", "mean_error", "bound"} <= set(quality["required"])
    result = spec["components"]["schemas"]["ResultOut"]["properties"]["quality"]
    assert {"$ref": "#/components/schemas/QualityOut"} in result["anyOf"]
