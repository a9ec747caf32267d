"""What did it cost: every chat attempt priced with Hermes's own pricing, rolled up per turn, subagent, session.

Pricing is Hermes's `agent.usage_pricing.estimate_usage_cost` on the attempt's usage as Hermes normalises it
(`normalize_usage`: input, output, cache read, cache write, reasoning), with the model, provider and base URL
Hermes prices with, so the numbers equal Hermes's own `/usage` and `session_estimated_cost_usd`.

Hermes's pricing can fetch: OpenRouter's model list, or an endpoint's `/models` (where custom and
OpenAI-compatible servers publish prices). We never let it: while we price, on our thread only, those two
fetchers read what Hermes has already cached (any age; Hermes refreshes it itself), and an attempt whose price
would need a fetch is `unknown` with the reason `not_cached` (:mod:`~hermes_otel.hermes_compat` holds
the private names this takes). On every other thread Hermes fetches as it always did.

Pricing costs 4-40 µs a call (measured; the endpoint-metadata route is the dear one), so it runs where a chat
attempt's response attributes are built, off the agent's thread. :class:`CostLedger` adds each attempt to its
turn, its session and, for a subagent's session, to the subagent and up through every ancestor's turn and
session (Hermes adds a child's cost to its parent's session total too). Totals are read where the turn,
subagent and session-end telemetry is built, after every attempt before them was priced.
"""

from __future__ import annotations

import contextlib
import math
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple, TypeGuard

from opentelemetry import trace

from .. import hermes_compat
from .. import semconv as sc
from .._internal import log as _log
from .._internal.bounded import BoundedMap
from .._internal.safety import report

# -- names (documented in catalog.py) --------------------------------------------------------------------------
USAGE_COST = "hermes.usage.cost"  # USD, on a chat span
USAGE_COST_STATUS = "hermes.usage.cost_status"
USAGE_COST_SOURCE = "hermes.usage.cost_source"
USAGE_PRICING_VERSION = "hermes.usage.pricing_version"
USAGE_COST_REASON = "hermes.usage.cost_reason"
TURN_COST = "hermes.turn.cost"
TURN_COST_STATUS = "hermes.turn.cost_status"
TURN_PROVIDER_COST = "hermes.turn.provider_cost"  # the part of hermes.turn.cost the provider reported
SUBAGENT_COST = "hermes.subagent.cost"
SUBAGENT_COST_STATUS = "hermes.subagent.cost_status"
SUBAGENT_PROVIDER_COST = "hermes.subagent.provider_cost"
SESSION_COST = "hermes.session.cost"
SESSION_COST_STATUS = "hermes.session.cost_status"
SESSION_PROVIDER_COST = "hermes.session.provider_cost"
PROVIDER = "provider"  # USAGE_COST_SOURCE of a cost the provider reported in its response (status `actual`)
PROFILE = "hermes.profile"
COST_METRIC = "hermes.usage.cost"
COST_UNIT = "{USD}"  # an annotation: Prometheus names it hermes_usage_cost_total

# Why an attempt's cost is `unknown` (USAGE_COST_REASON).
NOT_CACHED = "not_cached"  # Hermes would have to fetch the route's prices; it has not cached them
NO_PRICE = "no_price"  # Hermes has no price for the route (or for a token bucket the attempt used)
NO_USAGE = "no_usage"  # the response reported no usage
UNAVAILABLE = "pricing_unavailable"  # this Hermes has no usable pricing module

REASONS = {
    NOT_CACHED: "Hermes has not cached this route's prices yet (pricing them would need a network request)",
    NO_PRICE: "Hermes has no price for this model and provider",
    NO_USAGE: "the provider reported no token usage",
    UNAVAILABLE: "this Hermes has no usable pricing module",
}

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


class Price(NamedTuple):
    """One attempt's cost as Hermes estimates it; `amount` is None when unknown."""

    amount: Decimal | None
    status: str  # estimated | included | actual | unknown (Hermes's CostStatus)
    source: str = "none"  # Hermes's CostSource
    version: str | None = None  # Hermes's pricing_version
    reason: str | None = None  # why unknown

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {USAGE_COST_STATUS: self.status, USAGE_COST_SOURCE: self.source}
        if self.amount is not None:
            attrs[USAGE_COST] = float(self.amount)
        if self.version:
            attrs[USAGE_PRICING_VERSION] = self.version
        if self.reason:
            attrs[USAGE_COST_REASON] = self.reason
        return attrs


_UNKNOWN = {reason: Price(None, "unknown", reason=reason) for reason in (NOT_CACHED, NO_USAGE, UNAVAILABLE)}


def provider_cost(usage: Any) -> Price | None:
    """What the provider says the call cost, when its response's usage says it (OpenRouter's `usage.cost`, in USD,
    with usage accounting on; a LiteLLM proxy's `usage.cost` where it adds one): a finite amount of at least zero."""
    if usage is None:
        return None
    value = usage.get("cost") if isinstance(usage, Mapping) else getattr(usage, "cost", None)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        return None
    return Price(amount, "actual", PROVIDER) if amount.is_finite() and amount >= 0 else None


def _scalar(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _namespace(value: Any, depth: int = 0) -> Any:
    """Dicts as attribute objects: `normalize_usage` reads provider SDK objects with getattr."""
    if isinstance(value, Mapping) and depth < 4:
        return types.SimpleNamespace(**{str(k): _namespace(v, depth + 1) for k, v in value.items()})
    return value


class _NeverRaised(Exception):
    """Hermes 0.20+'s pricing needs no cache guard: nothing raises this."""


class HermesPricing:
    """Hermes's `estimate_usage_cost` on what Hermes has cached: never a network request.

    Thread-safe; loads Hermes's modules on first use (on the calling thread)."""

    def __init__(self) -> None:
        self._module: Any = None  # agent.usage_pricing, once loaded
        self._from_cache: Any = contextlib.nullcontext  # 0.16-0.19: the fetchers read Hermes's caches only
        self._not_cached: type[BaseException] = _NeverRaised
        self._loaded: bool | None = None  # None: not tried yet

    def _load(self) -> bool:
        if self._loaded is None:
            try:
                self._module = self._pricing()
            except Exception:  # noqa: BLE001 - no Hermes, or one without this pricing: costs are unknown
                self._module = None
            version = hermes_compat.installed_version()
            if self._module is None and version is not None:  # without Hermes there is nothing to say
                _log.once("cost-pricing-unavailable", "hermes-otel: costs are unknown: hermes-otel does not know "
                          "how to keep this Hermes's pricing (%s) from the network; `hermes-otel doctor` says more",
                          version)
            self._loaded = self._module is not None
        return self._loaded

    def _pricing(self) -> Any:
        """Hermes's pricing. 0.16-0.19 fetch prices over the network from inside it, so there it is made to read
        Hermes's caches only on our thread (hermes_compat/internals.py); 0.20+ price without fetching what
        Hermes's own pricing of the same response has not fetched already (models.dev is read from its cache)."""
        if hermes_compat.pricing_fetches():
            internals = hermes_compat.legacy_internals()
            self._from_cache, self._not_cached = internals.pricing_from_cache, internals.NotCached
            return internals.cache_only_pricing()
        return hermes_compat.usage_pricing()

    def canonical_usage(self, usage: Any, provider: str | None, api_mode: str | None) -> Any:
        """Hermes's CanonicalUsage of a response's usage (or of Hermes's own normalised summary)."""
        summary = type(usage) is not types.SimpleNamespace and isinstance(usage, Mapping)  # the ABC check last
        if summary and "cache_read_tokens" in usage:  # post_api_request's summary (hooks mode)
            return self._module.CanonicalUsage(**{key: _int(usage.get(key)) for key in _USAGE_KEYS})
        return self._module.normalize_usage(_namespace(usage), provider=provider, api_mode=api_mode)

    def price(self, model: Any, usage: Any, *, provider: Any = None, base_url: Any = None,
              api_mode: Any = None) -> Price:
        """The cost of one response's `usage`, as Hermes would estimate it, from cached prices only."""
        if usage is None:
            return _UNKNOWN[NO_USAGE]
        if not self._load():
            return _UNKNOWN[UNAVAILABLE]
        provider, base_url, api_mode = _scalar(provider), _scalar(base_url), _scalar(api_mode)
        try:
            canonical = self.canonical_usage(usage, provider, api_mode)
            with self._from_cache():
                result = self._module.estimate_usage_cost(_scalar(model) or "", canonical, provider=provider,
                                                          base_url=base_url, api_key="")
        except self._not_cached:
            return _UNKNOWN[NOT_CACHED]
        except Exception as exc:  # noqa: BLE001 - Hermes's pricing failed on this input: unknown, said once
            report(self.price, exc)
            return _UNKNOWN[UNAVAILABLE]
        status = str(result.status)
        amount = result.amount_usd if isinstance(result.amount_usd, Decimal) else None
        return Price(amount, status, str(result.source), result.pricing_version,
                     NO_PRICE if amount is None else None)


_shared_pricing = HermesPricing()


@dataclass
class Totals:
    """A roll-up: the sum of the priced attempts, and how many attempts could not be priced."""

    amount: Decimal = Decimal(0)
    priced: int = 0
    unknown: int = 0
    estimated: bool = False  # some attempt was estimated by Hermes's tables, not just included
    provider: Decimal = Decimal(0)  # the part of `amount` the provider reported
    reported: int = 0  # attempts whose cost the provider reported

    def add(self, price: Price) -> None:
        if price.amount is None:
            self.unknown += 1
            return
        self.amount += price.amount
        self.priced += 1
        if price.source == PROVIDER:
            self.provider += price.amount
            self.reported += 1
        else:
            self.estimated = self.estimated or price.status != "included"

    @property
    def status(self) -> str:
        """`actual` (every attempt's cost as its provider reported it), `estimated` (some from Hermes's tables),
        `included` (all included in a subscription), `partial` (some unknown) or `unknown`."""
        if self.unknown:
            return "partial" if self.priced else "unknown"
        if self.estimated:
            return "estimated"
        return "actual" if self.reported == self.priced else "included"

    def attributes(self, cost_key: str, status_key: str, provider_key: str) -> dict[str, Any]:
        attrs: dict[str, Any] = {status_key: self.status}
        if self.priced:
            attrs[cost_key] = float(self.amount)
        if self.reported:
            attrs[provider_key] = float(self.provider)
        return attrs


@dataclass(frozen=True)
class _Link:
    parent_session: str
    parent_turn: str
    role: str


class CostLedger:
    """Prices chat attempts and keeps their totals per turn, subagent and session (bounded maps).

    `record` and the `*_attributes` readers run where telemetry is built (off the agent's thread);
    `subagent_started` is a dict insert on the hook's thread. Never raises."""

    def __init__(self, meter: Any = None, *, pricing: HermesPricing | None = None, max_entries: int = 4096,
                 profile: str | None = None) -> None:
        self._pricing = pricing or _shared_pricing
        self._lock = threading.Lock()  # a price's additions to every roll-up, together
        self._turns: BoundedMap[str, Totals] = BoundedMap(max_entries)
        self._sessions: BoundedMap[str, Totals] = BoundedMap(max_entries)
        self._subagents: BoundedMap[str, Totals] = BoundedMap(max_entries)  # child session id -> its subtree
        self._links: BoundedMap[str, _Link] = BoundedMap(max_entries)  # child session id -> where it was delegated from
        self._profile = profile
        self._profile_known = profile is not None
        self._counter = None
        if meter is not None:
            self._counter = meter.create_counter(
                COST_METRIC, unit=COST_UNIT,
                description="Estimated cost in USD of provider attempts, priced by Hermes's own pricing",
            )

    @property
    def profile(self) -> str | None:
        if not self._profile_known:
            self._profile, self._profile_known = hermes_compat.active_profile_name(), True
        return self._profile

    def subagent_started(self, payload: Mapping[str, Any]) -> None:
        child = _scalar(payload.get("child_session_id"))
        if child is None:
            return
        link = _Link(_scalar(payload.get("parent_session_id")) or "", _scalar(payload.get("parent_turn_id")) or "",
                     _scalar(payload.get("child_role")) or "")
        self._links.put(child, link)

    def record(self, span: Any, request: Any, context: Mapping[str, Any], response: Any,
               attributes: dict[str, Any] | None = None) -> Price | None:
        """A chat attempt's response: price its usage, put the cost on `span` (into `attributes` instead,
        when given: the caller sets them with its own), add it to every roll-up."""
        try:
            return self._record(span, request, context, response, attributes)
        except Exception as exc:  # noqa: BLE001 - fail open: the span goes out without a cost
            report(self.record, exc)
            return None

    def _record(self, span: Any, request: Any, context: Mapping[str, Any], response: Any,
                attributes: dict[str, Any] | None) -> Price:
        if response is None:
            usage = None
        elif type(response) is not types.SimpleNamespace and isinstance(response, Mapping):
            usage = response.get("usage")
        else:
            usage = getattr(response, "usage", None)
        model = _scalar(context.get("model"))  # what Hermes prices with (its agent.model)
        if model is None and isinstance(request, Mapping):
            model = _scalar(request.get("model"))
        provider, base_url = context.get("provider"), context.get("base_url")
        price = provider_cost(usage) or self._pricing.price(model, usage, provider=provider, base_url=base_url,
                                                            api_mode=context.get("api_mode"))
        if attributes is None:
            span.set_attributes(price.attributes())
        else:
            attributes.update(price.attributes())
        session, turn = _scalar(context.get("session_id")), _scalar(context.get("turn_id"))
        role = None
        with self._lock:
            if turn:
                self._total(self._turns, turn).add(price)
            seen = set()
            while session and session not in seen:  # this session, then each delegating ancestor's
                seen.add(session)
                self._total(self._sessions, session).add(price)
                link = self._links.get(session)
                if link is None:
                    break
                role = link.role if role is None else role  # the nearest subagent's role labels the metric
                self._total(self._subagents, session).add(price)
                if link.parent_turn:
                    self._total(self._turns, link.parent_turn).add(price)
                session = link.parent_session
        if self._counter is not None and price.amount is not None:
            labels = {sc.PROVIDER: sc.provider_name(provider, base_url), USAGE_COST_SOURCE: price.source}
            for key, value in ((sc.REQUEST_MODEL, model), (sc.PLATFORM, _scalar(context.get("platform"))),
                               (PROFILE, self.profile), (sc.SUBAGENT_ROLE, role)):
                if value:
                    labels[key] = value[:128]
            self._counter.add(float(price.amount), labels, trace.set_span_in_context(span))  # exemplar: the attempt
        return price

    def turn_attributes(self, turn_id: Any) -> dict[str, Any]:
        """For the turn's root span at its end: the turn's total (subagents included) and the profile."""
        with self._lock:
            totals = self._turns.get(turn_id) if isinstance(turn_id, str) else None
            attrs = totals.attributes(TURN_COST, TURN_COST_STATUS, TURN_PROVIDER_COST) if totals is not None else {}
        if self.profile:
            attrs[PROFILE] = self.profile
        return attrs

    def subagent_attributes(self, child_session_id: Any) -> dict[str, Any]:
        with self._lock:
            totals = self._subagents.get(child_session_id) if isinstance(child_session_id, str) else None
            if totals is None:
                return {}
            return totals.attributes(SUBAGENT_COST, SUBAGENT_COST_STATUS, SUBAGENT_PROVIDER_COST)

    def session_attributes(self, session_id: Any) -> dict[str, Any]:
        """For the session's end records: its total so far (its subagents' included, as Hermes counts)."""
        with self._lock:
            totals = self._sessions.get(session_id) if isinstance(session_id, str) else None
            if totals is None:
                return {}
            return totals.attributes(SESSION_COST, SESSION_COST_STATUS, SESSION_PROVIDER_COST)

    def adopt(self, other: CostLedger) -> None:
        """Take over another ledger's totals (configuration reload)."""
        with other._lock, self._lock:
            for name in ("_turns", "_sessions", "_subagents", "_links"):
                getattr(self, name).adopt(getattr(other, name))

    @staticmethod
    def _total(table: BoundedMap[str, Totals], key: str) -> Totals:
        totals = table.get(key) or Totals()
        table.put(key, totals)  # the newest now: the oldest untouched goes first
        return totals


# -- reading it back (view, hermes-otel cost) ---------------------------------------------------------------------


def format_usd(amount: float) -> str:
    """$1,234.57 from a dollar up, else up to six decimals ($0.002566); never an exponent."""
    if amount == 0:
        return "$0"
    sign, amount = ("-" if amount < 0 else ""), abs(amount)
    if amount >= 1:
        return f"{sign}${amount:,.2f}"
    if amount < 0.000001:
        return f"{sign}<$0.000001"
    return f"{sign}$" + f"{amount:.6f}".rstrip("0").rstrip(".")


_SHOWN = ((USAGE_COST, USAGE_COST_STATUS, "cost"), (TURN_COST, TURN_COST_STATUS, "total"),
          (SUBAGENT_COST, SUBAGENT_COST_STATUS, "total"))


def _finite(amount: Any) -> TypeGuard[float]:
    """A number that can be shown as dollars (data read back from files may hold `Infinity` or a huge integer)."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        return False
    try:
        return math.isfinite(amount)
    except OverflowError:
        return False


def describe(attributes: Mapping[str, Any]) -> str | None:
    """`cost $0.0021` (an attempt), `total $0.0123` (a turn, a subagent), `cost unknown (no price)`, or None."""
    for key, status_key, label in _SHOWN:
        status, amount = attributes.get(status_key), attributes.get(key)
        if status is None and amount is None:
            continue
        if _finite(amount):
            return f"{label} {format_usd(amount)}" + (" (partial)" if status == "partial" else "")
        reason = attributes.get(USAGE_COST_REASON)
        return f"{label} unknown" + (f" ({str(reason).replace('_', ' ')})" if reason else "")
    return None

