"""Pure mappings from Hermes payloads to OpenTelemetry GenAI attributes.

Every function here takes plain inputs and returns an attribute dict; none
touches the SDK, so they are cheap to test and safe to call on any thread.
Attribute names are a public contract: the telemetry reference in docs/ is
generated from the constants below.
"""

from __future__ import annotations

import functools
import math
import urllib.parse
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from . import hermes_compat

# The semantic-conventions release whose names we emit (tests/unit/test_semconv_registry.py checks every name against
# the installed registry, and this URL against its newest schema): on the resource and on every tracer, meter and
# logger we get, so a backend can translate our names when the conventions move on.
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
# The instrumentation scope of our spans, metrics and records (the tracer and meter names).
SCOPE = "hermes_otel"

# -- names ------------------------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"  # captured content (opt-in)
TOOL_CALL_RESULT = "gen_ai.tool.call.result"  # captured content (opt-in)
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_TOP_P = "gen_ai.request.top_p"
REQUEST_TOP_K = "gen_ai.request.top_k"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_SEED = "gen_ai.request.seed"
REQUEST_STOP = "gen_ai.request.stop_sequences"
REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
REQUEST_CHOICE_COUNT = "gen_ai.request.choice.count"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT = "gen_ai.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_WRITE = "gen_ai.usage.cache_write.input_tokens"
USAGE_CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"  # v1.41.0's name of cache_write
USAGE_REASONING = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"

# Middleware layers and request rewrites (middleware/layers.py; documented in the telemetry reference).
MIDDLEWARE_KIND = "hermes.middleware.kind"
MIDDLEWARE_PLUGIN = "hermes.middleware.plugin"
MIDDLEWARE_CALLBACK = "hermes.middleware.callback"
MIDDLEWARE_INDEX = "hermes.middleware.index"
MIDDLEWARE_OUTCOME = "hermes.middleware.outcome"
MIDDLEWARE_PAYLOAD_CHANGED = "hermes.middleware.payload_changed"
MIDDLEWARE_CHANGED_KEYS = "hermes.middleware.changed_keys"
MIDDLEWARE_SOURCE = "hermes.middleware.source"
MIDDLEWARE_REASON = "hermes.middleware.reason"
MIDDLEWARE_NAME = "hermes.middleware.name"
MIDDLEWARE_TERMINAL = "hermes.middleware.terminal"
MIDDLEWARE_REWRITE_EVENT = "hermes.middleware.rewrite"
MIDDLEWARE_FAILURE_EVENT = "hermes.middleware.failure"

TURN_ID = "hermes.turn.id"
TASK_ID = "hermes.task.id"
PLATFORM = "hermes.platform"
API_REQUEST_ID = "hermes.api_request.id"
API_ATTEMPT = "hermes.api.attempt"
LLM_PURPOSE = "hermes.llm.purpose"  # an auxiliary call's Hermes task (title_generation, compression, ...)
API_MODE = "hermes.api.mode"
HERMES_PROVIDER = "hermes.provider"
TOOL_STATUS = "hermes.tool.status"
TURN_COMPLETED = "hermes.turn.completed"
TURN_INTERRUPTED = "hermes.turn.interrupted"
TURN_END_REASON = "hermes.turn.end_reason"
HERMES_RESPONSE_ID = "hermes.response.id"
RESPONSE_STUB = "hermes.response.stub"

API_RETRY_COUNT = "hermes.api.retry_count"
API_MAX_RETRIES = "hermes.api.max_retries"
API_RETRYABLE = "hermes.api.retryable"
API_ERROR_REASON = "hermes.api.error_reason"
APPROVAL_SURFACE = "hermes.approval.surface"
APPROVAL_PATTERN_KEY = "hermes.approval.pattern_key"
APPROVAL_PATTERN_KEYS = "hermes.approval.pattern_keys"
APPROVAL_CHOICE = "hermes.approval.choice"
APPROVAL_DECIDED_BY = "hermes.approval.decided_by"
SUBAGENT_ROLE = "hermes.subagent.role"
SUBAGENT_GOAL_CHARS = "hermes.subagent.goal_chars"
SUBAGENT_STATUS = "hermes.subagent.status"
SUBAGENT_DURATION_MS = "hermes.subagent.duration_ms"
SUBAGENT_CHILD_SESSION = "hermes.subagent.child_session_id"
SUBAGENT_ID = "hermes.subagent.id"

AGENT = "hermes"
OP_CHAT = "chat"
OP_TOOL = "execute_tool"
OP_AGENT = "invoke_agent"

# Advisory bucket boundaries from the GenAI semantic conventions.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
AGENT_BUCKETS = tuple(0.1 * 2**i for i in range(13))
# gen_ai.invoke_agent.inference_calls / .tool_calls (semantic-conventions-genai, after the 1.44.0 registry).
CALL_COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)

# Request kwargs -> attribute, for the scalar settings we report.
_REQUEST_SCALARS = {
    "temperature": (REQUEST_TEMPERATURE, float),
    "top_p": (REQUEST_TOP_P, float),
    "top_k": (REQUEST_TOP_K, int),
    "seed": (REQUEST_SEED, int),
    "frequency_penalty": (REQUEST_FREQUENCY_PENALTY, float),
    "presence_penalty": (REQUEST_PRESENCE_PENALTY, float),
    "n": (REQUEST_CHOICE_COUNT, int),
}
_MAX_TOKENS_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens")

# Hermes provider ids (and aliases) -> gen_ai.provider.name well-known values.
_PROVIDERS = {
    "openai": "openai",
    "openai-codex": "openai",
    "anthropic": "anthropic",
    "claude": "anthropic",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "google-gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "vertex-ai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "aws-bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure-openai": "azure.ai.openai",
    "azure-foundry": "azure.ai.inference",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "perplexity": "perplexity",
    "xai": "x_ai",
    "x-ai": "x_ai",
    "grok": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}
# Hosts of well-known APIs, for `custom` providers pointed at them directly.
_HOSTS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.perplexity.ai": "perplexity",
    "api.x.ai": "x_ai",
    "api.cohere.com": "cohere",
}


@functools.lru_cache(maxsize=256)
def _provider_name(provider: str, base_url: str) -> str:
    return provider_name(provider, base_url)


@functools.lru_cache(maxsize=256)
def _server_items(base_url: str) -> tuple[tuple[str, Any], ...]:
    return tuple(server_attributes(base_url).items())


def provider_name(provider: Any, base_url: Any) -> str:
    """Map Hermes's provider id (and base_url for `custom`) to gen_ai.provider.name."""
    pid = str(provider or "").strip().lower()
    if pid in _PROVIDERS:
        return _PROVIDERS[pid]
    host = _host_port(base_url)[0]
    if host:
        if host in _HOSTS:
            return _HOSTS[host]
        if host.endswith(".openai.azure.com"):
            return "azure.ai.openai"
        if "bedrock" in host and host.endswith(".amazonaws.com"):
            return "aws.bedrock"
    return pid or "unknown"


def _host_port(base_url: Any) -> tuple[str | None, int | None]:
    if not isinstance(base_url, str) or not base_url:
        return None, None
    try:
        parts = urllib.parse.urlsplit(base_url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
        return parts.hostname, port
    except ValueError:
        return None, None


def server_attributes(base_url: Any) -> dict[str, Any]:
    host, port = _host_port(base_url)
    attrs: dict[str, Any] = {}
    if host:
        attrs[SERVER_ADDRESS] = host
        if port:
            attrs[SERVER_PORT] = port
    return attrs


_MISSING = object()


def _get(obj: Any, name: str) -> Any:
    """Attribute or key access that works on SDK objects, namespaces and dicts."""
    kind = type(obj)
    if kind is dict:  # the common cases first, without the cost of an ABC check
        return obj.get(name)
    if kind is SimpleNamespace:  # what Hermes's streaming path returns
        return getattr(obj, name, None)
    value = getattr(obj, name, _MISSING)
    if value is not _MISSING:
        return value
    return obj.get(name) if isinstance(obj, Mapping) else None


def _getter(obj: Any) -> Callable[[str], Any]:
    """`name -> value` for `obj`: a dict's own `get` for dicts and namespaces (no Python frame per
    read), else `_get`."""
    kind = type(obj)
    if kind is dict:
        return obj.get
    if kind is SimpleNamespace:
        return obj.__dict__.get
    return functools.partial(_get, obj)


def _num(value: Any, kind: type) -> Any:
    """`value` as `kind` (int or float) if it is a finite real number (not a bool), else None."""
    if type(value) is int and kind is int:  # the common cases first, without an ABC or subclass check
        return value
    if type(value) is float:
        return (value if kind is float else int(value)) if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # int(inf) raises; a non-finite setting or count is no number to report
    try:
        return kind(value)
    except Exception:  # noqa: BLE001 - a hostile subclass
        return None


def chat_request_attributes(request: Any, context: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes of one provider attempt from the EFFECTIVE request and the call context."""
    mapping = type(request) is dict or isinstance(request, Mapping)  # a dict without the ABC check
    model = request.get("model") if mapping else None
    model = model or context.get("model")
    provider, base_url = context.get("provider"), context.get("base_url")
    cacheable = isinstance(provider, (str, type(None))) and isinstance(base_url, (str, type(None)))
    attrs: dict[str, Any] = {
        OPERATION: OP_CHAT,
        PROVIDER: _provider_name(provider, base_url) if cacheable else provider_name(provider, base_url),
    }
    if model:
        attrs[REQUEST_MODEL] = str(model)
    if mapping:
        for key in request.keys() & _REQUEST_SCALARS.keys():  # the few present, picked in C
            name, kind = _REQUEST_SCALARS[key]
            if (value := _num(request[key], kind)) is not None:
                attrs[name] = value
        for key in _MAX_TOKENS_KEYS:
            value = request.get(key)
            if value is not None and (value := _num(value, int)) is not None:
                attrs[REQUEST_MAX_TOKENS] = value
                break
        stop = request.get("stop")
        if isinstance(stop, str):
            attrs[REQUEST_STOP] = (stop,)
        elif isinstance(stop, (list, tuple)) and all(isinstance(s, str) for s in stop):
            attrs[REQUEST_STOP] = tuple(stop)
        if isinstance(request.get("stream"), bool):
            attrs[REQUEST_STREAM] = request["stream"]
    attrs.update(_server_items(base_url) if isinstance(base_url, str) else server_attributes(base_url))
    attrs.update(_context_ids(context))
    if context.get("api_mode"):
        attrs[API_MODE] = str(context["api_mode"])
    if context.get("provider"):
        attrs[HERMES_PROVIDER] = str(context["provider"])
    return attrs


_CONTEXT_IDS = {"session_id": CONVERSATION_ID, "turn_id": TURN_ID, "api_request_id": API_REQUEST_ID}


def _context_ids(context: Mapping[str, Any]) -> dict[str, str]:
    attrs = {}
    for key in context.keys() & _CONTEXT_IDS.keys():
        value = context[key]
        if isinstance(value, str) and value:
            attrs[_CONTEXT_IDS[key]] = value
    return attrs


def chat_response_attributes(response: Any) -> dict[str, Any]:
    """Best-effort attributes of whatever the provider returned.

    Handles the streaming SimpleNamespace and `ChatCompletion` (chat
    completions), Anthropic `Message` and Responses-API objects, and dicts of
    the same shapes. Unknown shapes yield what can be read and nothing else.
    """
    attrs: dict[str, Any] = {}
    if response is None:
        return attrs
    made_by_hermes = type(response) is SimpleNamespace
    get = _getter(response)
    rid = get("id")
    if made_by_hermes:
        # Hermes decides to stream inside the call (the request kwargs do not say); its streaming path
        # alone returns a SimpleNamespace, assembled from the chunks: the model and usage are the
        # provider's, and a stream that broke off is a stub whose finish reason Hermes chose. The id is
        # the provider's chunks' on 0.21+ when they carry one; else (and always on 0.16-0.20, which drop
        # it) Hermes's own "stream-<uuid>". Only the provider's values go under gen_ai.* names.
        attrs[REQUEST_STREAM] = True
        stub = hermes_compat.partial_stream_stub_id()
        if stub is not None and rid == stub:
            attrs[RESPONSE_STUB] = "partial_stream"
        if isinstance(rid, str) and rid:
            ours = rid.startswith("stream-") or RESPONSE_STUB in attrs
            attrs[HERMES_RESPONSE_ID if ours else RESPONSE_ID] = rid
    elif isinstance(rid, str) and rid:
        attrs[RESPONSE_ID] = rid
    model = get("model")
    if isinstance(model, str) and model:
        attrs[RESPONSE_MODEL] = model
    reasons = _finish_reasons(get) if not made_by_hermes or RESPONSE_STUB not in attrs else ()
    if reasons:
        attrs[RESPONSE_FINISH_REASONS] = reasons
    attrs.update(usage_attributes(get("usage")))
    return attrs




def _finish_reasons(get: Callable[[str], Any]) -> tuple[str, ...]:
    choices = get("choices")
    if isinstance(choices, (list, tuple)):
        return tuple(str(r) for c in choices if (r := _get(c, "finish_reason")))
    for key in ("stop_reason", "status"):  # Anthropic Messages / Responses API
        value = get(key)
        if isinstance(value, str) and value:
            return (value,)
    return ()


# gen_ai.usage.* -> the usage fields that carry it, first found wins (OpenAI, Anthropic, Responses shapes):
# on the usage itself, then in its prompt/input and completion/output details.
_USAGE_FIELDS = (
    (USAGE_INPUT, ("input_tokens", "prompt_tokens")),
    (USAGE_OUTPUT, ("output_tokens", "completion_tokens")),
    (USAGE_CACHE_READ, ("cache_read_input_tokens",)),
    (USAGE_CACHE_WRITE, ("cache_creation_input_tokens",)),
)
_INPUT_DETAIL_FIELDS = ((USAGE_CACHE_READ, ("cached_tokens",)),
                        (USAGE_CACHE_WRITE, ("cache_write_tokens", "cache_creation_tokens")))
_OUTPUT_DETAIL_FIELDS = ((USAGE_REASONING, ("reasoning_tokens",)),)


def usage_attributes(usage: Any) -> dict[str, int]:
    """Token usage from OpenAI (prompt/completion), Anthropic and Responses shapes."""
    attrs: dict[str, int] = {}
    if usage is None:
        return attrs
    get = _getter(usage)
    _first_counts(get, _USAGE_FIELDS, attrs)
    if USAGE_CACHE_READ not in attrs or USAGE_CACHE_WRITE not in attrs:
        details = get("prompt_tokens_details") or get("input_tokens_details")
        if details is not None:
            _first_counts(_getter(details), _INPUT_DETAIL_FIELDS, attrs)
    details = get("completion_tokens_details") or get("output_tokens_details")
    if details is not None:
        _first_counts(_getter(details), _OUTPUT_DETAIL_FIELDS, attrs)
    return attrs


def _first_counts(get: Callable[[str], Any], fields: tuple[tuple[str, tuple[str, ...]], ...],
                  attrs: dict[str, int]) -> None:
    for name, keys in fields:
        if name not in attrs:
            for key in keys:
                value = get(key)
                if value is not None and (value := _num(value, int)) is not None:
                    attrs[name] = value
                    break


def tool_attributes(tool_name: Any, context: Mapping[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = {OPERATION: OP_TOOL, TOOL_TYPE: "function", AGENT_NAME: AGENT}
    if isinstance(tool_name, str) and tool_name:
        attrs[TOOL_NAME] = tool_name
    call_id = context.get("tool_call_id")
    if isinstance(call_id, str) and call_id:
        attrs[TOOL_CALL_ID] = call_id
    attrs.update(_context_ids(context))
    return attrs


def turn_attributes(session_id: str, turn_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = {OPERATION: OP_AGENT, AGENT_NAME: AGENT, TURN_ID: turn_id}
    if session_id:
        attrs[CONVERSATION_ID] = session_id
    task_id = payload.get("task_id")
    if isinstance(task_id, str) and task_id:
        attrs[TASK_ID] = task_id
    platform = payload.get("platform")
    if isinstance(platform, str) and platform:
        attrs[PLATFORM] = platform
    model = payload.get("model")
    if isinstance(model, str) and model:
        attrs[REQUEST_MODEL] = model
    return attrs


def error_attributes(exc: BaseException) -> dict[str, Any]:
    """`error.type` is the exception class; an HTTP status, when the error has one, rides along."""
    attrs: dict[str, Any] = {ERROR_TYPE: type(exc).__name__}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        attrs[HTTP_STATUS] = status
    return attrs


def _str(value: Any, cap: int = 256) -> str | None:
    return value[:cap] if isinstance(value, str) and value else None


def _pick(payload: Mapping[str, Any], mapping: tuple[tuple[str, str, type], ...]) -> dict[str, Any]:
    """Typed attributes from a payload: strings (capped), ints, bools; anything else is skipped."""
    attrs: dict[str, Any] = {}
    for key, name, kind in mapping:
        value = payload.get(key)
        if kind is str:
            value = _str(value)
        elif kind is int:
            value = _num(value, int)
        elif kind is bool:
            value = value if isinstance(value, bool) else None
        if value is not None:
            attrs[name] = value
    return attrs


def api_error_attributes(payload: Mapping[str, Any]) -> dict[str, Any]:
    attrs = _pick(
        payload,
        (
            ("retry_count", API_RETRY_COUNT, int),
            ("max_retries", API_MAX_RETRIES, int),
            ("retryable", API_RETRYABLE, bool),
            ("reason", API_ERROR_REASON, str),
            ("status_code", HTTP_STATUS, int),
        ),
    )
    error = payload.get("error")
    if isinstance(error, Mapping) and _str(error.get("type")):
        attrs[ERROR_TYPE] = _str(error.get("type"))
    return attrs


def approval_attributes(payload: Mapping[str, Any]) -> dict[str, Any]:
    attrs = _pick(
        payload,
        (
            ("surface", APPROVAL_SURFACE, str),
            ("pattern_key", APPROVAL_PATTERN_KEY, str),
            ("choice", APPROVAL_CHOICE, str),
            ("decided_by", APPROVAL_DECIDED_BY, str),
            ("turn_id", TURN_ID, str),
            ("tool_call_id", TOOL_CALL_ID, str),
        ),
    )
    keys = payload.get("pattern_keys")
    if isinstance(keys, (list, tuple)) and all(isinstance(k, str) for k in keys):
        attrs[APPROVAL_PATTERN_KEYS] = tuple(k[:256] for k in keys[:32])
    return attrs


def subagent_attributes(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A subagent is an agent invocation (`invoke_agent hermes`) of its own; its role stays an attribute."""
    attrs: dict[str, Any] = {OPERATION: OP_AGENT, AGENT_NAME: AGENT}
    attrs.update(_pick(
        payload,
        (
            ("child_role", SUBAGENT_ROLE, str),
            ("child_status", SUBAGENT_STATUS, str),
            ("duration_ms", SUBAGENT_DURATION_MS, int),
            ("child_session_id", SUBAGENT_CHILD_SESSION, str),
            ("child_subagent_id", SUBAGENT_ID, str),
            ("parent_session_id", CONVERSATION_ID, str),
        ),
    ))
    goal = payload.get("child_goal")
    if isinstance(goal, str):
        attrs[SUBAGENT_GOAL_CHARS] = len(goal)
    return attrs


def record_error(span: Any, error: BaseException) -> None:
    """Status ERROR, `error.type`, and an `exception` event, with the text redacted and capped.

    The SDK's `record_exception` would export the raw message and stack
    trace; provider and tool errors can carry credentials, so we build the
    event ourselves from redacted text. No `exception.escaped`: the conventions
    deprecated it, and it would be wrong where Hermes caught the exception (a
    `fail_open` layer's).
    """
    import traceback

    from .redaction.content import redact_text

    try:
        message = redact_text(str(error), 1024)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails
        message = f"<unprintable {type(error).__name__}>"
    try:
        stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except Exception:  # noqa: BLE001
        stack = ""
    span.set_attributes(error_attributes(error))
    span.add_event(
        "exception",
        {
            "exception.type": type(error).__name__,
            "exception.message": message,
            "exception.stacktrace": redact_text(stack, 8192),
        },
    )
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {message}"[:512]))
