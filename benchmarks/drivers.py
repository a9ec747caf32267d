"""Drive real Hermes 0.19.0's middleware runners and hook dispatch the way its call sites do.

Imported after HERMES_HOME is set (see run.py). Each driver builds hook
payloads only when a hook is subscribed (`has_hook`), as Hermes does, so
the cost of building them is part of what the plugin adds.
"""

from __future__ import annotations

import types
from typing import Any

from hermes_cli import middleware as hermes_middleware
from hermes_cli.plugins import PluginContext, PluginManifest, get_plugin_manager

V1 = "hermes.observer.v1"
SESSION = "bench-session"
MODEL = "bench-model"


def history(length: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 else "assistant", "content": f"message {i} " * 20} for i in range(length)]


def request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, "max_tokens": 256, "temperature": 0.1, "stream": True}


def _response() -> types.SimpleNamespace:
    # What Hermes's streaming path returns (see HERMES.md).
    message = types.SimpleNamespace(role="assistant", content="done", tool_calls=None, reasoning_content=None)
    choice = types.SimpleNamespace(index=0, message=message, finish_reason="stop")
    usage = types.SimpleNamespace(prompt_tokens=100, completion_tokens=20, total_tokens=120,
                                  prompt_tokens_details=None, completion_tokens_details=None)
    return types.SimpleNamespace(id="chatcmpl-bench", model=MODEL, choices=[choice], usage=usage)


RESPONSE = _response()


class Hermes:
    """One simulated agent: turn and call ids as Hermes makes them."""

    def __init__(self) -> None:
        self.manager = get_plugin_manager()
        self.turn_id = f"{SESSION}:task:00000000"
        self.calls = 0

    def _hook(self, name: str, **payload: Any) -> None:
        if self.manager.has_hook(name):
            self.manager.invoke_hook(name, telemetry_schema_version=V1, **payload)

    def start_turn(self, index: int, messages: list[dict[str, Any]]) -> None:
        self.turn_id = f"{SESSION}:task:{index:08x}"
        self.calls = 0
        self._hook("pre_llm_call", session_id=SESSION, task_id="task", turn_id=self.turn_id, user_message="go",
                   conversation_history=list(messages), is_first_turn=index == 0, model=MODEL, platform="cli",
                   sender_id="bench")

    def end_turn(self, messages: list[dict[str, Any]]) -> None:
        ids = {"session_id": SESSION, "task_id": "task", "turn_id": self.turn_id}
        self._hook("post_llm_call", **ids, user_message="go", assistant_response="done",
                   conversation_history=list(messages), model=MODEL, platform="cli")
        self._hook("on_session_end", **ids, completed=True, interrupted=False, model=MODEL, platform="cli")

    def llm_call(self, messages: list[dict[str, Any]]) -> Any:
        self.calls += 1
        api_request_id = f"{self.turn_id}:api:{self.calls}"
        body = request(messages)
        context = dict(task_id="task", turn_id=self.turn_id, api_request_id=api_request_id, session_id=SESSION,
                       platform="cli", model=MODEL, provider="custom", base_url="http://127.0.0.1:1/v1",
                       api_mode="chat_completions", api_call_count=self.calls)
        if self.manager.has_hook("pre_api_request"):  # Hermes copies the history for it (see HERMES.md)
            self._hook("pre_api_request", **context, user_message="go", conversation_history=list(messages),
                       request_messages=list(messages), message_count=len(messages), tool_count=0,
                       approx_input_tokens=0, request_char_count=0, max_tokens=256, started_at=0.0,
                       middleware_trace=[], request={"method": "POST", "body": dict(body)})
        response = hermes_middleware.run_llm_execution_middleware(
            body, lambda r: RESPONSE, original_request=body, middleware_trace=[], **context)
        self._hook("post_api_request", **context, api_duration=0.001, started_at=0.0, ended_at=0.001,
                   finish_reason="stop", message_count=len(messages), response_model=MODEL,
                   response={"id": RESPONSE.id}, usage={"input_tokens": 100, "output_tokens": 20},
                   assistant_message=RESPONSE.choices[0].message, assistant_content_chars=4,
                   assistant_tool_call_count=0)
        return response

    def tool_call(self, index: int) -> Any:
        call_id = f"call_{index}"
        args = {"command": "true"}
        ids = dict(task_id="task", session_id=SESSION, tool_call_id=call_id, turn_id=self.turn_id,
                   api_request_id=f"{self.turn_id}:api:{self.calls}")
        self._hook("pre_tool_call", tool_name="terminal", args=args, middleware_trace=[], **ids)
        result = hermes_middleware.run_tool_execution_middleware(
            "terminal", args, lambda a: '{"output": ""}', original_args=args, **ids)
        self._hook("post_tool_call", tool_name="terminal", args=args, result=result, duration_ms=1, status="ok", **ids)
        self._hook("transform_tool_result", tool_name="terminal", args=args, result=result, duration_ms=1,
                   status="ok", **ids)
        return result

    def turn(self, index: int, messages: list[dict[str, Any]]) -> None:
        """A whole turn: the model asks for a tool, then answers."""
        self.start_turn(index, messages)
        self.llm_call(messages)
        self.tool_call(index)
        self.llm_call(messages)
        self.end_turn(messages)


def _bench_layer(payload_key: str) -> Any:
    def layer(**kw: Any) -> Any:
        return kw["next_call"](kw[payload_key])

    layer.bench_layer = True  # type: ignore[attr-defined]
    return layer


def install_layers(count: int) -> None:
    """`count` pass-through execution layers of a third-party plugin (registered through Hermes), in place of the
    ones installed before; the plugin's own middleware (Hermes 0.2x) stays where it is."""
    manager = get_plugin_manager()
    for kind in ("llm_execution", "tool_execution"):
        layers = manager._middleware.get(kind)
        if layers:
            layers[:] = [cb for cb in layers if not getattr(cb, "bench_layer", False)]
    third = PluginContext(PluginManifest(name="bench_layer", source="bench", key="bench_layer"), manager)
    for _ in range(count):
        third.register_middleware("llm_execution", _bench_layer("request"))
        third.register_middleware("tool_execution", _bench_layer("args"))


def register_plugin() -> None:
    """Our plugin's real `register`, through a Hermes PluginContext (settings from the environment)."""
    from hermes_otel.plugin import register

    manager = get_plugin_manager()
    manager._hooks.clear()
    register(PluginContext(PluginManifest(name="hermes_otel", source="bench", key="hermes_otel"), manager))
