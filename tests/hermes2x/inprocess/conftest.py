"""The in-process runs of tests/integration, on the 0.2x line: the same fixtures (one Hermes home for the session,
set before Hermes is imported), in a pytest run of their own (Hermes imported here starts background work that a
`hermes chat` started later in the same process would wait on)."""

from tests.integration.conftest import _empty_spool, llm, receiver, traced, with_middleware_plugins  # noqa: F401
