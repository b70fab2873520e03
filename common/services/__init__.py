"""shoal.common.services: what the two services (the server and the
shuffler) share, and a device never imports.

``http_edge`` (uvicorn with timeouts, body limits and guards, the one
error shape),
``access_log`` (access lines that do not grow with the devices),
``device_cors`` (cross-origin access for browser devices), ``group_commit``
(many writers, one transaction and fsync), ``environment`` (settings from
``SHOAL_*``). They need the server extra (FastAPI, uvicorn,
pydantic-settings), which a device install does not have.

May import: ``shoal.common``'s top-level modules (``errors``) only. Imported
by ``shoal.server`` and ``shoal.shuffler``; never by ``shoal.client`` or the
rest of ``shoal.common`` (``tests/test_import_graph.py``).
"""
