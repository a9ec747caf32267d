"""Everything the package emits, with a description: the source of docs/telemetry.md.

Tests compare what a real Hermes run emits with this catalog, so a new name
cannot ship undocumented and the docs cannot describe a name we dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from hermes_otel import semconv as sc
from hermes_otel.capture import http_client
from hermes_otel.capture import logs as hermes_logs
from hermes_otel.capture.bridge import (
    CONTENT_KEYS,
    HOOK_ATTR,
    KNOWN_HOOKS,
    SCHEMA_ATTR,
    SESSION_COST_HOOKS,
    STRING_KEYS,
)
from hermes_otel.cost import pricing as cost
from hermes_otel.middleware import layers as mw
from hermes_otel.semconv import AGENT_BUCKETS, CALL_COUNT_BUCKETS, DURATION_BUCKETS
from hermes_otel.tracking import instruments
from hermes_otel.tracking.calls import DETAILS_EVENT


@dataclass(frozen=True)
class SpanDoc:
    name: str
    kind: str
    description: str
    attributes: tuple[str, ...]


@dataclass(frozen=True)
class MetricDoc:
    name: str
    instrument: str
    unit: str
    description: str
    attributes: tuple[str, ...]
    buckets: tuple[float, ...] = ()


ATTRIBUTES: dict[str, str] = {
    sc.OPERATION: "`invoke_agent`, `chat` or `execute_tool`.",
    sc.PROVIDER: "GenAI provider, mapped from Hermes's provider id (and base URL for `custom`).",
    sc.AGENT_NAME: "Always `hermes` (on a tool call too: the agent that called it).",
    sc.TOOL_DESCRIPTION: "What the request's tool schema told the model the tool does (capped at 1 KiB); set when "
    "the turn's requests carried the tool's schema.",
    sc.CONVERSATION_ID: "Hermes session id; the turns of one session share it.",
    sc.REQUEST_MODEL: "Model of the effective (possibly rewritten) request.",
    sc.REQUEST_TEMPERATURE: "Request temperature, when set.",
    sc.REQUEST_TOP_P: "Request top_p, when set.",
    sc.REQUEST_TOP_K: "Request top_k, when set.",
    sc.REQUEST_MAX_TOKENS: "`max_tokens` / `max_completion_tokens` / `max_output_tokens`, when set.",
    sc.REQUEST_SEED: "Request seed, when set.",
    sc.REQUEST_STOP: "Stop sequences, when set.",
    sc.REQUEST_FREQUENCY_PENALTY: "Frequency penalty, when set.",
    sc.REQUEST_PRESENCE_PENALTY: "Presence penalty, when set.",
    sc.REQUEST_CHOICE_COUNT: "`n`, when set.",
    sc.REQUEST_STREAM: "Whether the response was streamed (from the request, or Hermes's streamed response object).",
    sc.RESPONSE_MODEL: "Model named in the provider's response.",
    sc.RESPONSE_ID: "The provider's response id: of a non-streamed response, and of a streamed one on Hermes 0.21+ "
                    "(which keeps its chunks' id). Hermes 0.16-0.20 drop a stream's id and give the reply one of their "
                    "own, exported as `hermes.response.id`.",
    sc.HERMES_RESPONSE_ID: "The id Hermes gave a streamed response (`stream-<uuid>`) where it kept no provider id; "
                           "not the provider's.",
    sc.RESPONSE_STUB: "`partial_stream` when the stream broke off and Hermes stood in a stub response (its finish "
                      "reason is Hermes's, so `gen_ai.response.finish_reasons` is left out).",
    sc.RESPONSE_FINISH_REASONS: "Finish reason of each choice (or stop reason / status for other APIs), as the "
    "provider gave it; on `invoke_agent`, the turn's last reply's.",
    sc.RESPONSE_TIME_TO_FIRST_CHUNK: "Seconds from sending a streamed request to its first chunk (of the stream that "
    "gave the reply, if Hermes re-sent it); streamed replies only. On Hermes 0.20+ the first chunk is the first text "
    "delta Hermes reports (`on_stream_delta`), timed from the attempt's start: a reply that only calls tools has none.",
    sc.USAGE_INPUT: "Input (prompt) tokens; on `invoke_agent`, the total of the turn's attempts that reported usage.",
    sc.USAGE_OUTPUT: "Output (completion) tokens; on `invoke_agent`, the turn's total.",
    sc.USAGE_CACHE_READ: "Input tokens served from the provider's cache.",
    sc.USAGE_CACHE_WRITE: "Input tokens written to the provider's cache.",
    sc.USAGE_REASONING: "Reasoning tokens, when reported.",
    sc.TOOL_NAME: "Tool name.",
    sc.TOOL_CALL_ID: "Tool call id from the model's reply.",
    sc.TOOL_TYPE: "Always `function` for Hermes tools.",
    sc.SERVER_ADDRESS: "Host of the provider's base URL (of the request's URL on HTTP client spans).",
    sc.SERVER_PORT: "Port of the provider's base URL (of the request's URL on HTTP client spans).",
    sc.ERROR_TYPE: "Exception class name, or the tool status (`error`, `blocked`, `cancelled`) "
                   "/ Hermes's `error_type`; on HTTP client spans, the status code of a 4xx/5xx response.",
    sc.HTTP_STATUS: "HTTP status of a failed provider call, when the error carries one; the response's status on "
                    "HTTP client spans.",
    http_client.METHOD: "HTTP method of the request (`_OTHER` for a method the conventions do not know).",
    http_client.URL: "The request's URL, with user info and credential-named query values masked.",
    http_client.PROTOCOL_VERSION: "HTTP version of the response (`1.1`, `2`).",
    sc.TURN_ID: "Hermes turn id (`{session_id}:{task_id}:{8hex}`).",
    sc.TASK_ID: "Hermes task id.",
    sc.PLATFORM: "Hermes platform (`cli`, gateway platform name, ...).",
    sc.API_REQUEST_ID: "Hermes api_request_id (`{turn_id}:api:{n}`); shared by the retries of one request.",
    sc.API_ATTEMPT: "1, 2, ... for the attempts of the same api_request_id.",
    sc.LLM_PURPOSE: "On an auxiliary model call (one Hermes makes outside its main loop): Hermes's task name, "
        "`title_generation`, `compression`, `approval`, `vision`, `web_extract`, `session_search`, `mcp`, ... "
        "(`auxiliary` when Hermes names none). Absent on the main loop's calls (`hermes-otel cost --by purpose` "
        "shows them as `main`).",
    sc.API_MODE: "Hermes api_mode (`chat_completions`, `anthropic_messages`, `codex_responses`, ...).",
    sc.HERMES_PROVIDER: "Hermes's own provider id, verbatim.",
    sc.TOOL_STATUS: "Hermes's verdict from `post_tool_call`: `ok`, `error`, `blocked` or `cancelled`.",
    sc.TURN_COMPLETED: "Whether the turn completed (`on_session_end`).",
    sc.TURN_INTERRUPTED: "Whether the turn was interrupted (`on_session_end`).",
    sc.TURN_END_REASON: "Why a turn span was ended by us rather than by Hermes's `on_session_end`: `session_closed` "
                        "(the session ended first: `on_session_finalize` / `on_session_reset`, or Hermes gave up after "
                        "its retries, which fires no `on_session_end`), `shutdown` (process exit), `plugin_unloaded`, "
                        "`ttl` (open longer than the turn TTL), `evicted` (more open turns than the cap).",
    "gen_ai.token.modality": "Always `unknown`: Hermes reports token totals, not their modalities (metric "
    "attribute of the usage counters).",
    sc.API_RETRY_COUNT: "From `api_request_error`: retries so far.",
    sc.API_MAX_RETRIES: "From `api_request_error`: the retry budget.",
    sc.API_RETRYABLE: "From `api_request_error`: whether Hermes will retry.",
    sc.API_ERROR_REASON: "From `api_request_error`: Hermes's classification of the failure.",
    sc.APPROVAL_SURFACE: "`cli`, `gateway` or `smart`.",
    sc.APPROVAL_PATTERN_KEY: "The dangerous-command pattern that needed approval.",
    sc.APPROVAL_PATTERN_KEYS: "All matched pattern keys.",
    sc.APPROVAL_CHOICE: "`once`, `session`, `always`, `deny`, `timeout`, `smart_approve`, `smart_deny`.",
    sc.APPROVAL_DECIDED_BY: "`aux_llm` for smart approvals.",
    sc.SUBAGENT_ROLE: "The subagent's role.",
    sc.SUBAGENT_GOAL_CHARS: "Size of the subagent's goal, in characters (the goal itself is content).",
    sc.SUBAGENT_STATUS: "The subagent's final status (`subagent_stop`).",
    sc.SUBAGENT_DURATION_MS: "The subagent's duration as Hermes measured it.",
    sc.SUBAGENT_CHILD_SESSION: "The subagent's session id (its turns' `gen_ai.conversation.id`).",
    sc.SUBAGENT_ID: "Hermes's subagent id.",
    "gen_ai.input.messages": "Content capture (SPAN_ONLY / SPAN_AND_EVENT), in the conventions' message schema "
    "(`role` + `parts`): the turn's user message; on a `chat` span what the model received, history included (a "
    "system prompt sent as a message stays a message). Built off the agent's thread; redacted and capped message "
    "by message: older messages that do not fit are left out and counted in a `hermes.omitted` part.",
    "gen_ai.output.messages": "Content capture, in the message schema: the turn's final answer (`finish_reason` "
    "`stop`); on a `chat` span the reply's messages (reasoning, text, tool calls) with each one's `finish_reason`.",
    "gen_ai.system_instructions": "Content capture: instructions the provider takes apart from the messages "
    "(Anthropic's `system`, the Responses API's `instructions`), as parts.",
    "gen_ai.tool.definitions": "Content capture (opt-in with it): the tools the request offered the model (type, "
    "name, description, parameters).",
    "gen_ai.tool.call.arguments": "Content capture: the tool's (effective) arguments as JSON, redacted (by key too), "
    "capped.",
    "gen_ai.tool.call.result": "Content capture: the tool's result, encoded once: a structure, or text holding a JSON "
    "object or array (as Hermes's tool results are), as that JSON; other text as itself. Redacted, capped.",
    mw.KIND: "Middleware kind: `llm_request`, `tool_request`, `llm_execution`, `tool_execution`.",
    mw.PLUGIN: "The plugin that registered the callback (its manifest name).",
    mw.CALLBACK: "The callback's qualified name (`module.qualname`).",
    mw.INDEX: "Position in the chain, 0 = outermost (for the innermost real call: the number of layers).",
    mw.OUTCOME: "`ok`, `fail_open` (raised; the chain went on without it or kept the downstream result), "
    "`short_circuit` (returned without calling next_call) or `error` (a downstream error passed through, "
    "or it transformed one).",
    mw.PAYLOAD_CHANGED: "The layer called next_call with a different payload.",
    mw.CHANGED_KEYS: "Top-level payload keys whose values differ (names only, never values).",
    mw.SOURCE: "A rewrite's `source` as the middleware returned it (`plugin` when it gave none).",
    mw.REASON: "A rewrite's `reason`, when given.",
    mw.NAME: "A rewrite's `name`, when given.",
    mw.TERMINAL: "On the innermost span of a chain: the real provider or tool call.",
    "hermes.link.type": "On a turn's span link: `previous_turn`.",
    cost.USAGE_COST: "Cost of the attempt in USD: what the provider reported in its response when it did "
    "(OpenRouter's `usage.cost`; `hermes.usage.cost_source` = `provider`), else Hermes's own estimate "
    "(`estimate_usage_cost` on its normalised usage); absent when unknown. The semantic conventions define no cost "
    "attribute yet. Also the name of the counter.",
    cost.USAGE_COST_STATUS: "`actual` (the provider's own figure), or Hermes's cost status: `estimated`, "
    "`included` (a subscription route), `actual` or `unknown`.",
    cost.USAGE_COST_SOURCE: "Where the cost came from: `provider` (the provider's response), or Hermes's price "
    "source: `official_docs_snapshot`, `provider_models_api`, `none`, ...",
    cost.USAGE_PRICING_VERSION: "Hermes's pricing version of the price used (e.g. `anthropic-pricing-2026-05`).",
    cost.USAGE_COST_REASON: "Why the cost is `unknown`: `not_cached` (Hermes has not fetched this route's prices; "
    "we never fetch), `no_price`, `no_usage`, `pricing_unavailable`.",
    cost.TURN_COST: "The turn's total in USD: every priced attempt in its trace, subagents and failed attempts "
    "that used tokens included.",
    cost.TURN_COST_STATUS: "`actual` (every attempt's cost as its provider reported it), `estimated` (some from "
    "Hermes's tables), `included`, `partial` (some attempts could not be priced) or `unknown`.",
    cost.TURN_PROVIDER_COST: "The part of `hermes.turn.cost` the providers reported themselves (USD); the rest is "
    "Hermes's estimate. Absent when no provider reported one.",
    cost.SUBAGENT_COST: "The subagent's total in USD (its whole subtree).",
    cost.SUBAGENT_COST_STATUS: "As for the turn: `actual`, `estimated`, `included`, `partial` or `unknown`.",
    cost.SUBAGENT_PROVIDER_COST: "The part of `hermes.subagent.cost` the providers reported themselves (USD).",
    cost.SESSION_COST: "On the session's end records: the session's total so far in USD (its subagents' included, "
    "as Hermes counts them).",
    cost.SESSION_COST_STATUS: "As for the turn: `actual`, `estimated`, `included`, `partial` or `unknown`.",
    cost.SESSION_PROVIDER_COST: "The part of `hermes.session.cost` the providers reported themselves (USD).",
    cost.PROFILE: "The Hermes profile the process runs (`default`, a profile name, or `custom`).",
    "hermes.otel.signal": "The pipeline: `traces`, `logs`, `metrics`, `atof` or `relay` (metric attribute).",
    "hermes.otel.spool.reason": "Why a spooled batch was removed unsent: `size` or `age` (over `spool_max_mb` / "
    "`spool_max_age`), `disk` (its disk came near full: the spool leaves the last 64 MiB, or a tenth of a small "
    "disk, to the local record), `rejected` (an item the endpoint refused on its own, once the batch was split: "
    "HTTP 400, 413, 422, or over gRPC failed twice while the endpoint took an empty request), `not_taken` (the "
    "endpoint does not take the signal: HTTP 404, 405, 501), `unreadable` (no readable request in it) (metric "
    "attribute).",
}

# The GenAI conventions' attributes of each span kind (semantic-conventions-genai, as its reports score reference
# instrumentations): level, and whether we set it, or why not. A test holds the "set" ones to what is emitted.
_ALWAYS, _CAPTURE = "set", "set under span capture (`SPAN_ONLY`, `SPAN_AND_EVENT`) and in the details event"
CONVENTIONS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "chat": (
        (sc.OPERATION, "Required", _ALWAYS),
        (sc.PROVIDER, "Required", _ALWAYS),
        (sc.ERROR_TYPE, "Conditionally Required", "set on a failed attempt"),
        (sc.CONVERSATION_ID, "Conditionally Required", _ALWAYS),
        ("gen_ai.output.type", "Conditionally Required", "not set: Hermes asks for text"),
        (sc.REQUEST_CHOICE_COUNT, "Conditionally Required", "set when the request has `n`"),
        (sc.REQUEST_MODEL, "Conditionally Required", _ALWAYS),
        (sc.REQUEST_SEED, "Conditionally Required", "set when the request has one"),
        (sc.SERVER_PORT, "Conditionally Required", "set from the provider's base URL"),
        *((name, "Recommended", "set when the request has one") for name in (
            sc.REQUEST_FREQUENCY_PENALTY, sc.REQUEST_MAX_TOKENS, sc.REQUEST_PRESENCE_PENALTY, sc.REQUEST_STOP,
            sc.REQUEST_TEMPERATURE, sc.REQUEST_TOP_K, sc.REQUEST_TOP_P)),
        (sc.RESPONSE_FINISH_REASONS, "Recommended", "set from the reply"),
        (sc.RESPONSE_ID, "Recommended", "set from the reply (a streamed reply's on Hermes 0.21+; before, Hermes's own "
         "id of it is `hermes.response.id`)"),
        (sc.RESPONSE_MODEL, "Recommended", "set from the reply"),
        (sc.RESPONSE_TIME_TO_FIRST_CHUNK, "Recommended", "set for a streamed reply"),
        *((name, "Recommended", "set when the reply reports it") for name in (
            sc.USAGE_INPUT, sc.USAGE_OUTPUT, sc.USAGE_CACHE_READ, sc.USAGE_CACHE_WRITE, sc.USAGE_REASONING)),
        (sc.SERVER_ADDRESS, "Recommended", "set from the provider's base URL"),
        ("gen_ai.input.messages", "Opt-In", _CAPTURE),
        ("gen_ai.output.messages", "Opt-In", _CAPTURE),
        ("gen_ai.system_instructions", "Opt-In", _CAPTURE + ", where the API takes instructions apart"),
        ("gen_ai.tool.definitions", "Opt-In", _CAPTURE),
    ),
    # The internal invoke_agent span (the latest conventions have no provider, agent id or version, or cache tokens
    # on it any more).
    "invoke_agent": (
        (sc.OPERATION, "Required", _ALWAYS),
        (sc.ERROR_TYPE, "Conditionally Required", "set when the turn did not complete"),
        ("gen_ai.agent.description", "Conditionally Required", "not set: Hermes has no agent description"),
        (sc.AGENT_NAME, "Conditionally Required", _ALWAYS),
        (sc.CONVERSATION_ID, "Conditionally Required", _ALWAYS),
        ("gen_ai.data_source.id", "Conditionally Required", "not set: Hermes names no data source"),
        ("gen_ai.output.type", "Conditionally Required", "not set: Hermes asks for text"),
        *((name, "Conditionally Required", "not set: on each `chat` span") for name in (
            sc.REQUEST_CHOICE_COUNT, sc.REQUEST_SEED)),
        (sc.REQUEST_MODEL, "Recommended", "set when Hermes names the turn's model"),
        *((name, "Recommended", "not set: on each `chat` span") for name in (
            sc.REQUEST_FREQUENCY_PENALTY, sc.REQUEST_MAX_TOKENS, sc.REQUEST_PRESENCE_PENALTY, sc.REQUEST_STOP,
            sc.REQUEST_TEMPERATURE, sc.REQUEST_TOP_P)),
        (sc.RESPONSE_FINISH_REASONS, "Recommended", "set: the last reply's"),
        (sc.USAGE_INPUT, "Recommended", "set: the turn's total"),
        (sc.USAGE_OUTPUT, "Recommended", "set: the turn's total"),
        ("gen_ai.input.messages", "Opt-In", "set under span capture: the user's message"),
        ("gen_ai.output.messages", "Opt-In", "set under span capture: the final answer"),
        ("gen_ai.system_instructions", "Opt-In", "not set: on each `chat` span"),
        ("gen_ai.tool.definitions", "Opt-In", "set under span capture: the tools the agent had (its last request's)"),
    ),
    "execute_tool": (
        (sc.OPERATION, "Required", _ALWAYS),
        (sc.ERROR_TYPE, "Conditionally Required", "set when the call failed or was blocked"),
        (sc.AGENT_NAME, "Conditionally Required", _ALWAYS),
        (sc.TOOL_CALL_ID, "Recommended", "set when the model gave one"),
        (sc.TOOL_DESCRIPTION, "Recommended", "set when the turn's requests carried the tool's schema"),
        (sc.TOOL_NAME, "Recommended", _ALWAYS),
        (sc.TOOL_TYPE, "Recommended", _ALWAYS),
        ("gen_ai.tool.call.arguments", "Opt-In", "set under span capture"),
        ("gen_ai.tool.call.result", "Opt-In", "set under span capture"),
    ),
}


def _coverage() -> list[str]:
    out = ["## GenAI conventions, by span kind", "",
           "What the conventions ask of each span kind, and what we set. Content (Opt-In) is also in the "
           f"`{DETAILS_EVENT}` event under `EVENT_ONLY` / `SPAN_AND_EVENT`.", ""]
    for kind, rows in CONVENTIONS.items():
        out += [f"### `{kind}`", "", "| attribute | level | set? |", "|---|---|---|"]
        out += [f"| `{name}` | {level} | {how} |" for name, level, how in rows] + [""]
    return out


SPANS: tuple[SpanDoc, ...] = (
    SpanDoc(
        "invoke_agent hermes",
        "INTERNAL",
        "One per user turn: from the turn's first hook or middleware call to `on_session_end`. The root of its trace, "
        "or, when the agent is called under a valid active span (a gateway, a server, a job runner) or with "
        "`TRACEPARENT` (and `TRACESTATE`, `BAGGAGE`) in the environment, read by the `OTEL_PROPAGATORS` propagators "
        "(`none`: not joined), a child in the caller's trace; the caller's baggage goes on with our model requests. "
        "Links to the previous turn's root of the same session. Only a turn Hermes reports completed is not an error: "
        "interrupted, incomplete, given up after failed provider attempts, or ended by us (`hermes.turn.end_reason`) "
        "is status ERROR with `error.type` (`interrupted`, the failed attempt's error type, `incomplete`, or the end "
        "reason).",
        (sc.OPERATION, sc.AGENT_NAME, sc.CONVERSATION_ID, sc.TURN_ID, sc.TASK_ID, sc.PLATFORM, sc.REQUEST_MODEL,
         sc.TURN_COMPLETED, sc.TURN_INTERRUPTED, sc.TURN_END_REASON, sc.ERROR_TYPE, sc.USAGE_INPUT, sc.USAGE_OUTPUT,
         sc.RESPONSE_FINISH_REASONS, "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions",
         cost.TURN_COST,
         cost.TURN_COST_STATUS, cost.TURN_PROVIDER_COST, cost.PROFILE),
    ),
    SpanDoc(
        "chat {gen_ai.request.model}",
        "CLIENT",
        "One per provider attempt, around Hermes's whole `llm_execution` chain. A failed attempt is ERROR with an "
        "`exception` event; retries of the same request share `hermes.api_request.id`. A streamed reply (Hermes "
        "streams by default) has `gen_ai.response.time_to_first_chunk`. Also one per auxiliary "
        "model call (titles, compression, smart approvals, ...: `hermes.llm.purpose`), under the span current "
        "where Hermes makes it, else its session's turn.",
        (sc.OPERATION, sc.PROVIDER, sc.REQUEST_MODEL, sc.REQUEST_TEMPERATURE, sc.REQUEST_TOP_P, sc.REQUEST_TOP_K,
         sc.REQUEST_MAX_TOKENS, sc.REQUEST_SEED, sc.REQUEST_STOP, sc.REQUEST_FREQUENCY_PENALTY,
         sc.REQUEST_PRESENCE_PENALTY, sc.REQUEST_CHOICE_COUNT, sc.REQUEST_STREAM, sc.RESPONSE_MODEL, sc.RESPONSE_ID,
         sc.HERMES_RESPONSE_ID, sc.RESPONSE_STUB, sc.RESPONSE_FINISH_REASONS, sc.RESPONSE_TIME_TO_FIRST_CHUNK,
         sc.USAGE_INPUT, sc.USAGE_OUTPUT,
         sc.USAGE_CACHE_READ, sc.USAGE_CACHE_WRITE,
         sc.USAGE_REASONING, sc.SERVER_ADDRESS, sc.SERVER_PORT, sc.CONVERSATION_ID, sc.TURN_ID, sc.API_REQUEST_ID,
         sc.API_ATTEMPT, sc.API_MODE, sc.HERMES_PROVIDER, sc.ERROR_TYPE, sc.HTTP_STATUS, sc.API_RETRY_COUNT,
         sc.API_MAX_RETRIES, sc.API_RETRYABLE, sc.API_ERROR_REASON, cost.USAGE_COST, cost.USAGE_COST_STATUS,
         cost.USAGE_COST_SOURCE, cost.USAGE_PRICING_VERSION, cost.USAGE_COST_REASON, sc.LLM_PURPOSE,
         "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions"),
    ),
    SpanDoc(
        "execute_tool {gen_ai.tool.name}",
        "INTERNAL",
        "One per tool call, around the `tool_execution` chain (once per call, also for parallel batches, where "
        "Hermes runs the chain twice). Status from `post_tool_call`; a call blocked before execution still gets one.",
        (sc.OPERATION, sc.AGENT_NAME, sc.TOOL_NAME, sc.TOOL_DESCRIPTION, sc.TOOL_CALL_ID, sc.TOOL_TYPE,
         sc.CONVERSATION_ID, sc.TURN_ID, sc.API_REQUEST_ID, sc.TOOL_STATUS, sc.ERROR_TYPE, sc.HTTP_STATUS,
         "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"),
    ),
    SpanDoc(
        "approval",
        "INTERNAL",
        "The time an approval decision takes (`pre_approval_request` to `post_approval_response`), under the "
        "tool call it guards. ERROR when denied or timed out; the tool then shows `hermes.tool.status=blocked`.",
        (sc.APPROVAL_SURFACE, sc.APPROVAL_PATTERN_KEY, sc.APPROVAL_PATTERN_KEYS, sc.APPROVAL_CHOICE,
         sc.APPROVAL_DECIDED_BY, sc.TURN_ID, sc.TOOL_CALL_ID),
    ),
    SpanDoc(
        "invoke_agent hermes (a subagent)",
        "INTERNAL",
        "A subagent's life (`subagent_start` to `subagent_stop`) under the parent's `delegate_task` tool span, "
        "named as the GenAI conventions name an agent invocation; its role is `hermes.subagent.role`. "
        "The child's turn roots (`invoke_agent hermes`, with their own metrics) nest under it.",
        (sc.OPERATION, sc.AGENT_NAME, sc.SUBAGENT_ROLE, sc.SUBAGENT_GOAL_CHARS, sc.SUBAGENT_STATUS,
         sc.SUBAGENT_DURATION_MS, sc.SUBAGENT_CHILD_SESSION, sc.SUBAGENT_ID, sc.CONVERSATION_ID, cost.SUBAGENT_COST,
         cost.SUBAGENT_COST_STATUS, cost.SUBAGENT_PROVIDER_COST),
    ),
)

HTTP_CLIENT_SPAN = SpanDoc(
    "{http.request.method}",
    "CLIENT",
    "With `http.client_spans` (on by default): each request Hermes's model client sends with `httpx` for a model "
    "call we trace (scope `hermes_otel.http_client`, stable HTTP client conventions), under the span that made it; "
    "the request carries it in `traceparent` (the `OTEL_PROPAGATORS` format), so an instrumented model server "
    "continues the trace ([backends](backends.md#traces-that-continue-into-model-servers)). ERROR on an "
    "exception or a 4xx/5xx response. Any other request (a tool's downloads, MCP, the host's) gets neither span "
    "nor header.",
    http_client.ATTRIBUTES,
)

_LAYER_ATTRS = (mw.KIND, mw.PLUGIN, mw.CALLBACK, mw.INDEX, mw.OUTCOME, mw.PAYLOAD_CHANGED, mw.CHANGED_KEYS,
                 sc.ERROR_TYPE, sc.HTTP_STATUS)
MIDDLEWARE_SPANS: tuple[SpanDoc, ...] = (
    SpanDoc(
        "{hermes.middleware.kind} {hermes.middleware.plugin}",
        "INTERNAL",
        "One per registered `llm_execution` / `tool_execution` callback, nested in chain order inside the "
        "`chat` / `execute_tool` span; a failed layer is ERROR with an `exception` event. For a concurrent "
        "tool batch Hermes runs the chain twice, nested: both passes appear inside the one `execute_tool`.",
        _LAYER_ATTRS,
    ),
    SpanDoc(
        "provider_call {model} / tool_call {tool}",
        "INTERNAL",
        "The real provider or tool call, innermost in a chain (only when layers exist), so each layer's "
        "self time is visible.",
        (mw.KIND, mw.INDEX, mw.TERMINAL, sc.ERROR_TYPE, sc.HTTP_STATUS),
    ),
)

EVENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    mw.REWRITE_EVENT: (
        "On `chat` (llm_request) or `execute_tool` (tool_request), one per replacement, in order; the list "
        "equals the `middleware_trace` Hermes hands to observers for the same call.",
        (mw.KIND, mw.PLUGIN, mw.CALLBACK, mw.INDEX, mw.CHANGED_KEYS, mw.SOURCE, mw.REASON, mw.NAME),
    ),
    mw.FAILURE_EVENT: (
        "A request-middleware callback raised (Hermes skipped it).",
        (mw.KIND, mw.PLUGIN, mw.CALLBACK, mw.INDEX, sc.ERROR_TYPE, sc.HTTP_STATUS),
    ),
    "exception": ("The standard exception event on a failed span.", ()),
}

_CALL_METRIC_ATTRS = (sc.OPERATION, sc.PROVIDER, sc.REQUEST_MODEL, sc.RESPONSE_MODEL, sc.SERVER_ADDRESS, sc.SERVER_PORT,
                      sc.LLM_PURPOSE, sc.ERROR_TYPE)
_FIRST_CHUNK = "Time from sending a streamed provider request to its first chunk (streamed replies only)."
_CHUNK_GAP = "Time between consecutive chunks of a streamed reply, one measurement per chunk after the first."


def _histogram(key: str, description: str, attributes: tuple[str, ...], table=instruments.HISTOGRAMS) -> MetricDoc:
    name, unit, _, buckets = table[key]
    return MetricDoc(name, "histogram", unit, description, attributes, buckets)


METRICS: tuple[MetricDoc, ...] = (
    _histogram("inference_duration", "Duration of each provider attempt.", _CALL_METRIC_ATTRS),
    _histogram("input_tokens", "Input tokens of each provider attempt (0 when its provider reported none, and for "
               "a failed attempt).", _CALL_METRIC_ATTRS),
    _histogram("output_tokens", "Output tokens of each provider attempt (0 as above).", _CALL_METRIC_ATTRS),
    *(MetricDoc(name, "counter", "{token}", f"{description}: " + (
        "every provider attempt adds its count (0 when its provider reported none, and for a failed attempt)"
        if key in instruments.ALWAYS_COUNTED else "each provider attempt whose provider reported it adds its count")
        + f"; `{instruments.MODALITY}` is `unknown` (Hermes reports totals, not modalities).",
        (*_CALL_METRIC_ATTRS[:-1], instruments.MODALITY))
      for key, (name, description) in instruments.USAGE_COUNTERS.items()),
    _histogram("tool_duration", "Duration of each tool call.", (sc.OPERATION, sc.TOOL_NAME, sc.ERROR_TYPE)),
    _histogram("first_chunk", _FIRST_CHUNK, _CALL_METRIC_ATTRS[:-1]),
    _histogram("chunk_gap", _CHUNK_GAP, _CALL_METRIC_ATTRS[:-1]),
    MetricDoc(
        "gen_ai.invoke_agent.duration", "histogram", "s", "Duration of each agent turn.",
        (sc.OPERATION, sc.AGENT_NAME, sc.ERROR_TYPE), AGENT_BUCKETS,
    ),
    MetricDoc(
        "gen_ai.invoke_agent.inference_calls", "histogram", "{inference_call}",
        "Provider attempts each agent turn made, failed ones included (a subagent's are its own turns'). Defined by "
        "the GenAI conventions after the 1.44.0 registry.",
        (sc.OPERATION, sc.AGENT_NAME, sc.ERROR_TYPE), CALL_COUNT_BUCKETS,
    ),
    MetricDoc(
        "gen_ai.invoke_agent.tool_calls", "histogram", "{tool_call}",
        "Tool calls each agent turn made (a subagent's are its own turns'). Defined by the GenAI conventions after "
        "the 1.44.0 registry.",
        (sc.OPERATION, sc.AGENT_NAME, sc.ERROR_TYPE), CALL_COUNT_BUCKETS,
    ),
    MetricDoc(
        "hermes.tool.calls", "counter", "{call}", "Tool calls by tool and Hermes's status (`post_tool_call`).",
        (sc.TOOL_NAME, sc.TOOL_STATUS),
    ),
    MetricDoc(
        "hermes.api.errors", "counter", "{error}", "Failed provider attempts by reason and HTTP status.",
        (sc.API_ERROR_REASON, sc.HTTP_STATUS),
    ),
    MetricDoc(
        "hermes.approvals", "counter", "{decision}", "Approval decisions by choice and surface.",
        (sc.APPROVAL_CHOICE, sc.APPROVAL_SURFACE),
    ),
    MetricDoc(
        "hermes.middleware.duration", "histogram", "s",
        "Time in one execution-middleware layer, downstream included.", (mw.KIND, mw.PLUGIN, mw.OUTCOME),
        DURATION_BUCKETS,
    ),
    MetricDoc(
        "hermes.middleware.failures", "counter", "{failure}", "Middleware callbacks that raised and were skipped.",
        (mw.KIND, mw.PLUGIN),
    ),
    MetricDoc(
        "hermes.middleware.rewrites", "counter", "{rewrite}", "Request-middleware payload replacements.",
        (mw.KIND, mw.SOURCE),
    ),
    MetricDoc(
        "hermes.otel.exporter.dropped", "counter", "{item}",
        "Telemetry items hermes-otel could not deliver (failed exports after retries, full export queues, observer "
        "records the full records queue refused), by signal (`traces`, `logs`, `metrics` always, 0 when healthy; "
        "`atof` and `relay` once they drop).",
        ("hermes.otel.signal",),
    ),
    MetricDoc(
        cost.COST_METRIC, "counter", cost.COST_UNIT,
        "Cost in USD of provider attempts: the provider's own figure where its response reported one, else Hermes's "
        "estimate (those it could price); `hermes.usage.cost_source` tells them apart (`provider`, or Hermes's "
        "price source). With an exemplar pointing at the attempt's span.",
        (sc.PROVIDER, sc.REQUEST_MODEL, sc.PLATFORM, cost.PROFILE, sc.SUBAGENT_ROLE, cost.USAGE_COST_SOURCE),
    ),
    MetricDoc(
        "hermes.otel.spool.size", "gauge", "By",
        "Bytes of undelivered telemetry waiting in the spool (`$HERMES_HOME/otel/spool`), by signal, as this "
        "process last counted them (with the spool on and an OTLP endpoint).", ("hermes.otel.signal",),
    ),
    MetricDoc(
        "hermes.otel.spool.spooled", "counter", "{batch}",
        "Batches this process wrote to the spool: not delivered after the exporter's retries, still unacknowledged "
        "at exit, or beyond what a slow endpoint could take.", ("hermes.otel.signal",),
    ),
    MetricDoc(
        "hermes.otel.spool.replayed", "counter", "{batch}",
        "Spooled batches this process re-sent and the endpoint acknowledged (whichever process spooled them).",
        ("hermes.otel.signal",),
    ),
    MetricDoc(
        "hermes.otel.spool.evicted", "counter", "{batch}",
        "Spooled batches this process removed unsent, by reason.",
        ("hermes.otel.signal", "hermes.otel.spool.reason"),
    ),
)

# What `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup` adds beside the latest names: the GenAI conventions' v1.41.0 names
# of what the latest renamed or replaced.
V1_41_METRICS: tuple[MetricDoc, ...] = (
    _histogram("operation_duration", "Duration of each provider attempt: v1.41.0's name of "
               "`gen_ai.client.inference.duration`.", _CALL_METRIC_ATTRS, instruments.V1_41_HISTOGRAMS),
    _histogram("tokens", "Tokens of each provider attempt that reported them, by `gen_ai.token.type`: v1.41.0's "
               "metric, replaced by the usage counters and the per-attempt token histograms.",
               (*_CALL_METRIC_ATTRS[:-1], instruments.TOKEN_TYPE), instruments.V1_41_HISTOGRAMS),
    _histogram("first_chunk_v1_41", _FIRST_CHUNK, _CALL_METRIC_ATTRS[:-1], instruments.V1_41_HISTOGRAMS),
    _histogram("chunk_gap_v1_41", _CHUNK_GAP, _CALL_METRIC_ATTRS[:-1], instruments.V1_41_HISTOGRAMS),
)
V1_41_ATTRIBUTES: dict[str, str] = {
    "gen_ai.token.type": "`input` or `output` (metric attribute of `gen_ai.client.token.usage`).",
    sc.USAGE_CACHE_CREATION: "v1.41.0's name of `gen_ai.usage.cache_write.input_tokens` (the same value), on `chat`.",
}

# Attributes some log records carry beyond the payload's own: hook -> attributes.
LOG_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    hook: (cost.SESSION_COST, cost.SESSION_COST_STATUS, cost.SESSION_PROVIDER_COST)
    for hook in sorted(SESSION_COST_HOOKS)
}

# Hermes's own log lines (capture/logs.py): their attributes.
HERMES_LOG_ATTRIBUTES: dict[str, str] = {
    hermes_logs.LOGGER_ATTR: "The Hermes logger that wrote the line (`agent.conversation_loop`, `tools.terminal_tool`, "
    "...).",
    "code.function.name": "The function that logged it.",
    "code.file.path": "Its source file.",
    "code.line.number": "Its line.",
    "exception.type": "The exception class, when the line was logged with one.",
    "exception.message": "The exception's message, masked.",
    "exception.stacktrace": "The formatted traceback, masked.",
}

RESOURCE: dict[str, str] = {
    "service.name": "`OTEL_SERVICE_NAME`, else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else plugins.toml "
                    "(`service_name`), else `hermes-agent`.",
    "service.version": "The installed hermes-agent version.",
    "service.instance.id": "A UUID per process.",
    "host.name": "Host name.",
    "process.pid": "Process id.",
    "hermes.version": "The installed hermes-agent version.",
    "hermes.otel.version": "This package's version.",
}


def telemetry_markdown() -> str:
    out = [
        "# Telemetry reference",
        "",
        "<!-- Generated by `python -m docsgen.reference`; do not edit by hand. -->",
        "",
        "Names follow the OpenTelemetry GenAI semantic conventions; `hermes.*` names are ours.",
        "Every name below is emitted by the package, and nothing else is (a test checks both ways).",
        "",
        "## Spans",
        "",
    ]
    for span in (*SPANS, *MIDDLEWARE_SPANS, HTTP_CLIENT_SPAN):
        out += [f"### `{span.name}` ({span.kind})", "", span.description, ""]
        out += _table((a, ATTRIBUTES[a]) for a in span.attributes) + [""]
    out += ["## Span events", ""]
    for name, (description, attrs) in EVENTS.items():
        out += [f"### `{name}`", "", description, ""]
        if attrs:
            out += _table((a, ATTRIBUTES[a]) for a in attrs) + [""]
    out += [
        "## Log records",
        "",
        "Every observer hook call is one OTLP log record, in order, named `hermes.observer.<hook>` (its",
        "`event_name`), with the trace and span ids of the span it belongs to (the tool call, else the turn).",
        "Hooks: " + ", ".join(f"`{h}`" for h in sorted(KNOWN_HOOKS)) + "; a hook Hermes adds later is",
        "exported the same way and reported once.",
        "",
        "| attribute | meaning |",
        "|---|---|",
        f"| `{HOOK_ATTR}` | The hook name. |",
        f"| `{SCHEMA_ATTR}` | The payload's `telemetry_schema_version` (`unknown` when missing). |",
        "| `hermes.<key>` | For the payload keys " + ", ".join(f"`{k}`" for k in STRING_KEYS)
        + " (ids and short enum-like strings), and for every other boolean or numeric field of the payload "
        "(durations, counts, flags). Never content: a number in a content field is not exported either. |",
        "",
        "The records of " + ", ".join(f"`{h}`" for h in LOG_ATTRIBUTES) + " (a turn's end, the session's end) "
        "also carry the session's cost so far:",
        "",
        *_table((a, ATTRIBUTES[a]) for a in sorted({a for attrs in LOG_ATTRIBUTES.values() for a in attrs})),
        "",
        "The body holds content only under capture (`EVENT_ONLY`, `SPAN_AND_EVENT`): the payload's "
        + ", ".join(f"`{k}`" for k in CONTENT_KEYS)
        + " fields, redacted and capped. These records never carry the conversation history (a `chat` span does "
        "under span capture: see privacy.md).",
        "",
        f"### `{DETAILS_EVENT}`",
        "",
        "Under `EVENT_ONLY` and `SPAN_AND_EVENT`: one event per `chat` span (a failed attempt's included), in that "
        "span's context, at severity DEBUG, as the GenAI conventions define it: the span's `gen_ai.*`, `server.*` "
        "and `error.type` attributes, and its content structured (an event's attributes may be): "
        "`gen_ai.input.messages`, `gen_ai.output.messages` (none for a failed attempt), `gen_ai.system_instructions` "
        "and `gen_ai.tool.definitions` where the request has them, in the conventions' message schema, redacted and "
        "capped as on spans. No body.",
        "",
        "### Hermes's own log lines",
        "",
        f"Hermes's own log lines (its loggers: `agent.*`, `tools.*`, `hermes_cli.*`, `gateway.*`, ...), at "
        "`logs.hermes_level` (`HERMES_OTEL_HERMES_LOG_LEVEL`, default `warning`) and above, are log records of the "
        f"instrumentation scope `{hermes_logs.SCOPE}`, without an `event_name`: the line's text as the body, its "
        "level as the severity, and the trace and span ids of the span active where it was logged, else of the open "
        "turn of the session Hermes tagged the line with, else none. Every body and exception goes through Hermes's "
        "own redactor and ours (Hermes applies its redactor only to its own files). With capture off (the default) "
        f"a line carries no content: each argument that is not a number or a short name reads `{hermes_logs.ELIDED}` "
        "(a command, a URL, a provider's error text), an exception keeps its type and stack (code) but not its "
        "message, and a line Hermes formatted before logging it (no arguments: what is content cannot be told) stays "
        "in Hermes's own log only. With capture on, lines are whole (redacted). Our own log lines and the observer "
        "records are never among them.",
        "",
        *_table(HERMES_LOG_ATTRIBUTES.items()),
        "",
    ]
    out += _coverage()
    out += ["## Metrics", "", "| name | instrument | unit | attributes | buckets |", "|---|---|---|---|---|"]
    out += [_metric_row(m) for m in METRICS]
    out += ["", "Metric attributes are low-cardinality only: never session, turn, request or call ids.", ""]
    out += ["### v1.41.0 names (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup`)", "",
            "The names above are the latest GenAI conventions' (open-telemetry/semantic-conventions-genai). With "
            "`gen_ai/dup` the names of v1.41.0 (the last release in open-telemetry/semantic-conventions) that the "
            "latest renamed or replaced are emitted beside them, for dashboards built on v1.41.0. The output "
            "messages keep their `finish_reason` in both: the latest deprecates it for "
            "`gen_ai.response.finish_reasons` but still allows it, and Phoenix shows no reply without it.",
            "", "| name | instrument | unit | attributes | buckets |", "|---|---|---|---|---|"]
    out += [_metric_row(m) for m in V1_41_METRICS]
    out += [""] + _table(V1_41_ATTRIBUTES.items()) + [""]
    out += ["## Resource", "", f"Schema URL `{sc.SCHEMA_URL}` (also on every tracer, meter and logger we use): the "
            "semantic-conventions release whose names we emit outside GenAI (the GenAI names are the GenAI "
            "conventions repository's latest, which has published no schema URL yet). `OTEL_RESOURCE_ATTRIBUTES` is "
            "applied over ours "
            "(the SDK's own reading), then `OTEL_SERVICE_NAME`.", ""] + _table(RESOURCE.items())
    out += ["", "## Attributes", ""] + _table(sorted(ATTRIBUTES.items()))
    return "\n".join(out) + "\n"


def _metric_row(m: MetricDoc) -> str:
    names = ", ".join(f"`{a}`" for a in m.attributes)
    return f"| `{m.name}` | {m.instrument} | `{m.unit}` | {names} | {', '.join(f'{b:g}' for b in m.buckets)} |"


def _table(rows) -> list[str]:
    """A two-column markdown table of (name, meaning) rows."""
    return ["| attribute | meaning |", "|---|---|"] + [f"| `{name}` | {meaning} |" for name, meaning in rows]
