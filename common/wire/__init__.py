"""shoal.common.wire: what travels between a device, the shuffler and the server.

``messages`` (a device's reports as columns and their JSON, written
without pydantic), ``fields`` (the message id and point limits every
message shares), ``models`` (the pydantic models the services parse and
check messages with), ``binary`` (the compact binary rows), ``envelope``
(sealing to the server's key), ``signing`` (signed round configs),
``transport`` (which URLs may carry a device's requests).

May import every other neighbourhood of ``shoal.common`` except
``services``: the wire carries the kinds' configs and the mechanisms'
outputs, so it sits above them; nothing below imports it.
"""
