"""The local record: the OTLP-JSON-lines trace files the file exporter writes (and the spool holds), read safely.

`files` finds and reads the files (regular files only, bounded), `decode` turns a line into spans, `traces` groups
them into traces, `summary` turns a trace into the row a list shows. `hermes-otel view`, `hermes-otel cost` and the
dashboard's Traces tab all read through here.
"""
