"""One bounded, insertion-ordered map: the state every tracked entity keeps.

Each entity (turns, chat attempts, tool calls, approvals, subagents) keeps what is open in one of
these. At `limit` entries the oldest goes first, handed to `on_evict` (which ends its span), so
state stays bounded however Hermes behaves. Reads of one key are single dict reads (atomic under
the GIL, no lock); writes take the map's own lock; eviction callbacks run outside it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMap(Generic[K, V]):
    def __init__(self, limit: int, on_evict: Callable[[V], None] | None = None) -> None:
        self._items: OrderedDict[K, V] = OrderedDict()
        self._limit = limit
        self._on_evict = on_evict
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        """Set `key` (as the newest entry); the oldest entries beyond the limit are evicted."""
        with self._lock:
            items = self._items
            items[key] = value
            items.move_to_end(key)
            if len(items) <= self._limit:
                return
            evicted = [items.popitem(last=False)[1] for _ in range(len(items) - self._limit)]
        self._evict(evicted)

    def pop(self, key: K) -> V | None:
        if key not in self._items:  # the common case, a single read: no lock
            return None
        with self._lock:
            return self._items.pop(key, None)

    def pop_if(self, key: K, value: V) -> bool:
        """Remove `key` only while it still maps to `value`."""
        with self._lock:
            if self._items.get(key) is value:
                del self._items[key]
                return True
            return False

    def pop_where(self, keep: Callable[[V], bool]) -> list[V]:
        """Remove and return the values `keep` selects, oldest first."""
        with self._lock:
            if not self._items:
                return []
            keys = [k for k, v in self._items.items() if keep(v)]
            return [self._items.pop(k) for k in keys]

    def find(self, match: Callable[[V], bool]) -> V | None:
        """The newest value `match` selects."""
        with self._lock:
            return next((v for v in reversed(self._items.values()) if match(v)), None)

    def take_all(self) -> list[V]:
        with self._lock:
            values = list(self._items.values())
            self._items.clear()
            return values

    def items(self) -> list[tuple[K, V]]:
        with self._lock:
            return list(self._items.items())

    def adopt(self, other: BoundedMap[K, V]) -> None:
        """Take over `other`'s entries (configuration reload); `other` is left empty."""
        with other._lock:
            taken = list(other._items.items())
            other._items.clear()
        for key, value in taken:
            self.put(key, value)

    def _evict(self, values: Iterable[V]) -> None:
        if self._on_evict is not None:
            for value in values:
                self._on_evict(value)

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
