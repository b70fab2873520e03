"""The operator dashboard (issue 16, item 5): server-rendered pages under /ui.

``session.py`` signs the login cookie and the forms' CSRF tokens, ``svg.py``
draws the plots as inline SVG (no plotting library on the server, no CDN),
``pages.py`` is the router, ``templates/`` and ``static/`` what it serves.
Every action goes through the same ``RoundService`` calls as the REST API,
and its errors get the status codes of ``http_errors.py``.
"""
