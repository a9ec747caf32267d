"""Generators of the reference docs and dashboards' names: tools, not part of the wheel."""
