"""The Traces tab of Hermes's own web dashboard (`hermes dashboard`).

`../dashboard/` holds what the dashboard loads (the manifest, plain JS on the host's plugin SDK, our stylesheet),
`install.py` puts it where Hermes finds dashboard plugins (`hermes-otel enable`) and says what `doctor` sees,
`routes.py` is the read-only API the tab calls (imported only by the dashboard, never at plugin load).
"""
