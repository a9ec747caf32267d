"""Hermes 0.16-0.19 internals that hermes-otel rebinds (capture/legacy/): the provider request thread's `threading`
and the pricing fetchers, made to read only Hermes's caches on our pricing thread.

Imported by name only where those internals exist (capture/legacy/__init__.py); never on Hermes 0.20+.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable
from typing import Any

from . import _METADATA, HTTP_THREAD_MODULE, _module

# -- the provider request thread (agent.chat_completion_helpers) ------------------------------------------------


def swap_http_threading(make_proxy: Callable[[types.ModuleType], Any]) -> bool:
    """Give Hermes's provider-call helpers `make_proxy(threading)` as their `threading` (they start the
    provider request's thread from it), if they still see the real module; True when swapped."""
    helpers = _module(HTTP_THREAD_MODULE)
    if helpers is None or getattr(helpers, "threading", None) is not threading:
        return False
    helpers.threading = make_proxy(threading)  # type: ignore[attr-defined]
    return True


def restore_http_threading(proxy_type: type) -> None:
    """Undo :func:`swap_http_threading` (when what is there is still our `proxy_type`)."""
    helpers = _module(HTTP_THREAD_MODULE)
    if helpers is not None and isinstance(getattr(helpers, "threading", None), proxy_type):
        helpers.threading = threading  # type: ignore[attr-defined]


# -- pricing: what Hermes has cached of the prices it fetches (agent.model_metadata) ----------------------------


class NotCached(Exception):
    """Hermes's pricing asked for metadata it would have to fetch."""


_cache_only = threading.local()  # set while hermes-otel prices on this thread
_disk: list[Any] = [None, {}]  # (path, mtime, size) of Hermes's OpenRouter file and what it held


def _openrouter_cached(metadata: types.ModuleType) -> dict:
    cached = metadata._model_metadata_cache  # rebound by Hermes on every refresh: read it each time
    if cached:
        return cached
    if hasattr(metadata, "_load_model_metadata_disk_cache"):  # 0.17+: Hermes keeps a copy on disk
        path = metadata._get_model_metadata_cache_path()
        try:
            stat = path.stat()
        except OSError:
            raise NotCached("openrouter") from None
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if _disk[0] != key:  # parsed again only when the file changes
            _disk[:] = [key, metadata._load_model_metadata_disk_cache() or {}]
        if _disk[1]:
            return _disk[1]
    raise NotCached("openrouter")


@functools.lru_cache(maxsize=64)
def _endpoint_key(metadata: types.ModuleType, base_url: str) -> str:
    """Where Hermes caches an endpoint's metadata ("" for none: OpenRouter's and empty URLs); a pure function of
    the URL, whose parsing was most of what pricing a custom endpoint cost."""
    normalized = metadata._normalize_base_url(base_url)
    return "" if not normalized or metadata._is_openrouter_base_url(normalized) else normalized


def _endpoint_cached(metadata: types.ModuleType, base_url: str) -> dict:
    normalized = _endpoint_key(metadata, base_url)
    if not normalized:
        return {}  # Hermes fetches nothing for these either
    cached = metadata._endpoint_model_metadata_cache.get(normalized)
    if cached is None:
        raise NotCached(normalized)
    return cached


def _guarded(hermes: Callable[..., Any], ours: Callable[..., Any]) -> Callable[..., Any]:
    """`ours` on a thread that prices for hermes-otel, Hermes's own function everywhere else."""
    def on_otel_pricing_thread_ours(*args: Any, **kwargs: Any) -> Any:
        if getattr(_cache_only, "on", False):
            return ours(*args, **kwargs)
        return hermes(*args, **kwargs)

    on_otel_pricing_thread_ours._hermes_otel_original = hermes  # type: ignore[attr-defined]
    return on_otel_pricing_thread_ours


_guard_lock = threading.Lock()


def cache_only_pricing() -> types.ModuleType | None:
    """Hermes's `agent.usage_pricing`, made to read only Hermes's caches while :func:`pricing_from_cache` is on,
    or None (an unknown Hermes, or one without these names: costs are unknown).

    Its two fetchers (OpenRouter's model list, an endpoint's `/models`) and its route resolution are rebound, once,
    to wrappers that call Hermes's own function on every other thread: Hermes keeps fetching as it always did."""
    pricing, metadata = _module("agent.usage_pricing"), _module("agent.model_metadata")
    if pricing is None or metadata is None or not all(hasattr(metadata, n) for n in _METADATA):
        return None
    resolve = getattr(pricing, "resolve_billing_route", None)
    resolve = getattr(resolve, "_hermes_otel_original", resolve)
    if not callable(resolve):
        return None
    ours: dict[str, Callable[..., Any]] = {"fetch_model_metadata": lambda *a, **k: _openrouter_cached(metadata),
            "fetch_endpoint_model_metadata": lambda url, *a, **k: _endpoint_cached(metadata, url),
            # A pure function of its arguments (a frozen BillingRoute), called twice per price: its URL parsing
            # was most of what pricing cost.
            "resolve_billing_route": functools.lru_cache(maxsize=256)(resolve)}
    if not all(callable(getattr(pricing, name, None)) for name in ours):
        return None
    with _guard_lock:
        for name, replacement in ours.items():
            original = getattr(pricing, name)
            if not hasattr(original, "_hermes_otel_original"):
                setattr(pricing, name, _guarded(original, replacement))
    return pricing


class pricing_from_cache:  # noqa: N801 - used as a `with` statement
    """While on, Hermes's pricing on this thread reads only what Hermes has cached (at any age); a route it would
    fetch raises :class:`NotCached`."""

    def __enter__(self) -> None:
        _cache_only.on = True

    def __exit__(self, *exc: object) -> None:
        _cache_only.on = False


