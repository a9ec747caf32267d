/* hermes-otel: the Traces tab of Hermes's dashboard. Plain JS on the host's plugin SDK (its React, its fetchJSON
 * with the session token); no build step. Every value from the API is rendered as text by React (never as HTML).
 * Classes are prefixed `hot-` and styled by our own stylesheet. */
(function () {
  "use strict";
  var SDK = window.__HERMES_PLUGIN_SDK__;
  var PLUGINS = window.__HERMES_PLUGINS__;
  if (!SDK || !PLUGINS) return;
  var React = SDK.React;
  var h = React.createElement;
  var useState = SDK.hooks.useState;
  var useEffect = SDK.hooks.useEffect;
  var useRef = SDK.hooks.useRef;
  var API = "/api/plugins/hermes_otel";
  var POLL_MS = 1000;
  var SETTLE_MS = 300;  // a changed filter is asked for once typing has paused this long

  // -- formatting ------------------------------------------------------------------------------------------------

  function ms(ns) {
    if (ns === null || ns === undefined || ns < 0) return "?";
    var v = ns / 1e6;
    return v < 1000 ? v.toFixed(1) + " ms" : (v / 1000).toFixed(2) + " s";
  }
  function when(ns) {
    var d = new Date(ns / 1e6);
    return isNaN(d.getTime()) ? "?" : d.toLocaleString();
  }
  function usd(amount) {
    if (amount === 0) return "$0";
    var a = Math.abs(amount), sign = amount < 0 ? "-" : "";
    if (a >= 1) return sign + "$" + a.toFixed(2);
    if (a < 0.000001) return sign + "<$0.000001";
    return sign + "$" + a.toFixed(6).replace(/0+$/, "").replace(/\.$/, "");
  }
  function costText(cost) {
    if (!cost) return "–";
    if (cost.amount === null || cost.amount === undefined) {
      return "unknown" + (cost.reason ? " (" + String(cost.reason).replace(/_/g, " ") + ")" : "");
    }
    var text = usd(cost.amount) + (cost.status === "partial" ? " (partial)" : "");
    if (cost.provider === undefined || cost.provider === null) return text;  // Hermes's estimate
    return text + (cost.provider === cost.amount ? " (provider's)" : " (" + usd(cost.provider) + " provider's)");
  }
  function text(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  // -- the URL holds the view, the filters and the selected trace, so a link reopens them ------------------------

  var FILTER_KEYS = ["errors", "rewrites", "model", "session", "q", "source"];
  function readUrl() {
    var p = new URLSearchParams(window.location.search);
    var f = {};
    FILTER_KEYS.forEach(function (k) { f[k] = p.get(k) || ""; });
    return { view: p.get("view") === "sessions" ? "sessions" : "traces", trace: p.get("trace") || "", filters: f };
  }
  function writeUrl(state) {
    var p = new URLSearchParams();
    if (state.view === "sessions") p.set("view", "sessions");
    if (state.trace) p.set("trace", state.trace);
    FILTER_KEYS.forEach(function (k) { if (state.filters[k]) p.set(k, state.filters[k]); });
    var qs = p.toString();
    window.history.replaceState(null, "", window.location.pathname + (qs ? "?" + qs : ""));
  }
  function withSource(path, filters) {
    return filters.source === "jaeger" ? path + (path.indexOf("?") < 0 ? "?" : "&") + "source=jaeger" : path;
  }
  function query(filters) {
    var p = new URLSearchParams();
    if (filters.source === "jaeger") p.set("source", "jaeger");
    if (filters.errors) p.set("errors", "true");
    if (filters.rewrites) p.set("rewrites", "true");
    ["model", "session", "q"].forEach(function (k) { if (filters[k]) p.set(k, filters[k]); });
    var qs = p.toString();
    return qs ? "?" + qs : "";
  }

  // -- polling -----------------------------------------------------------------------------------------------------

  function usePoll(url, paused) {
    var state = useState({ data: null, error: "" });
    var set = state[1];
    var started = useRef(false);
    useEffect(function () {
      // Each keystroke changes the url: only the one typed last is asked for (after SETTLE_MS), and the answer to
      // one no longer shown is dropped, its request aborted.
      var alive = true, timer = null, control = window.AbortController ? new AbortController() : null;
      function tick() {
        SDK.fetchJSON(url, control ? { signal: control.signal } : undefined).then(function (data) {
          if (alive) set({ data: data, error: "" });
        }).catch(function (err) {
          if (alive) set(function (old) { return { data: old.data, error: String(err && err.message || err) }; });
        }).then(function () {
          if (alive && !paused) timer = setTimeout(tick, POLL_MS);
        });
      }
      timer = setTimeout(tick, started.current ? SETTLE_MS : 0);
      started.current = true;
      return function () { alive = false; if (timer) clearTimeout(timer); if (control) control.abort(); };
    }, [url, paused]);
    return state[0];
  }

  // -- the list of turns -------------------------------------------------------------------------------------------

  function Filters(props) {
    var f = props.filters, change = props.onChange;
    function set(key, value) { var next = Object.assign({}, f); next[key] = value; change(next); }
    return h("div", { className: "hot-filters" },
      h("label", { className: "hot-check" }, h("input", {
        type: "checkbox", checked: !!f.errors, onChange: function (e) { set("errors", e.target.checked ? "1" : ""); }
      }), "errors only"),
      h("label", { className: "hot-check" }, h("input", {
        type: "checkbox", checked: !!f.rewrites,
        onChange: function (e) { set("rewrites", e.target.checked ? "1" : ""); }
      }), "has rewrites"),
      h("input", { className: "hot-input", placeholder: "model", value: f.model,
        onChange: function (e) { set("model", e.target.value); } }),
      h("input", { className: "hot-input", placeholder: "session", value: f.session,
        onChange: function (e) { set("session", e.target.value); } }),
      h("input", { className: "hot-input hot-search", placeholder: "search span names and attribute values",
        value: f.q, onChange: function (e) { set("q", e.target.value); } }));
  }

  function TraceList(props) {
    var polled = usePoll(API + "/traces" + query(props.filters), props.paused);
    var data = polled.data;
    if (!data) return h("p", { className: "hot-muted" }, polled.error ? "cannot load: " + polled.error : "loading…");
    if (!data.recorded) {
      return h("p", { className: "hot-muted" },
        "No local record yet: run a turn with hermes-otel enabled (the traces file is written by default).");
    }
    var rows = data.traces;
    return h("div", null,
      polled.error ? h("p", { className: "hot-warn" }, "last refresh failed: " + polled.error) : null,
      data.skipped_lines ? h("p", { className: "hot-muted" }, data.skipped_lines + " unreadable line(s) skipped") : null,
      h("table", { className: "hot-table" },
        h("thead", null, h("tr", null, ["start", "turn", "duration", "model", "tokens in → out", "cost", "tools",
          "errors", "rewrites"].map(function (c) { return h("th", { key: c }, c); }))),
        h("tbody", null, rows.length ? rows.map(function (r) {
          return h("tr", {
            key: r.trace_id, className: "hot-row" + (r.errors ? " hot-row-error" : ""), "data-trace": r.trace_id,
            onClick: function () { props.onOpen(r.trace_id); }
          },
          h("td", null, when(r.start_ns)),
          h("td", { className: "hot-mono", title: r.trace_id }, r.name + (r.session ? " · " + r.session : "")),
          h("td", { className: "hot-num" }, ms(r.duration_ns)),
          h("td", null, r.models.join(", ")),
          h("td", { className: "hot-num" }, r.input_tokens + " → " + r.output_tokens),
          h("td", { className: "hot-num hot-cost" + (r.cost && r.cost.amount === null ? " hot-unknown" : "") },
            costText(r.cost)),
          h("td", { className: "hot-num" }, r.tool_calls),
          h("td", { className: "hot-num" + (r.errors ? " hot-bad" : "") }, r.errors),
          h("td", { className: "hot-num" }, r.rewrites));
        }) : h("tr", null, h("td", { colSpan: 9, className: "hot-muted" }, "no turn matches")))));
  }

  // -- one trace: the waterfall --------------------------------------------------------------------------------------

  function kindOf(span) {
    var a = span.attributes;
    if (a["hermes.middleware.plugin"] !== undefined || a["hermes.middleware.outcome"] !== undefined) return "layer";
    if (span.operation === "chat") return "chat";
    if (span.operation === "execute_tool") return "tool";
    if (span.operation === "invoke_agent") return "turn";
    return "other";
  }

  function isFailure(e) { return e.name === "exception" || e.name === "hermes.middleware.failure"; }

  function eventText(e) {
    var a = e.attributes, parts = [];
    if (e.name === "exception") {
      return text(a["exception.type"]) + (a["exception.message"] ? ": " + text(a["exception.message"]) : "");
    }
    [["hermes.middleware.source", "source"], ["hermes.middleware.reason", "reason"], ["hermes.middleware.name", "name"],
      ["hermes.middleware.plugin", "plugin"], ["hermes.middleware.changed_keys", "changed"], ["error.type", "error"]
    ].forEach(function (pair) {
      var v = a[pair[0]];
      if (v !== undefined && v !== "") parts.push(pair[1] + " " + (Array.isArray(v) ? v.join(", ") : text(v)));
    });
    return parts.join(" · ");
  }

  function SpanRow(props) {
    var s = props.span, t0 = props.start, total = Math.max(props.end - props.start, 1);
    var left = Math.max(0, Math.min(100, (s.start_ns - t0) / total * 100));
    var width = Math.max(0.4, Math.min(100 - left, (Math.max(s.end_ns, s.start_ns) - s.start_ns) / total * 100));
    var kind = kindOf(s), outcome = s.attributes["hermes.middleware.outcome"];
    var bad = s.error || outcome === "error" || outcome === "fail_open";
    var label = [s.name];
    if (kind === "layer") {  // its plugin (unless the name says it) and its outcome
      var plugin = text(s.attributes["hermes.middleware.plugin"]);
      if (plugin && s.name.split(" ").indexOf(plugin) < 0) label.push("plugin " + plugin);
      label.push(text(outcome));
    }
    var tokensIn = s.attributes["gen_ai.usage.input_tokens"], tokensOut = s.attributes["gen_ai.usage.output_tokens"];
    return h("div", {
      className: "hot-span hot-kind-" + kind + (bad ? " hot-span-bad" : "") + (props.selected ? " hot-selected" : ""),
      onClick: function () { props.onSelect(s.span_id); }, "data-span": s.span_id
    },
    h("div", { className: "hot-label", style: { paddingLeft: Math.min(s.depth, 16) * 14 + "px" }, title: s.name },
      h("span", { className: "hot-name" }, label.join(" · ")),
      s.cost ? h("span", { className: "hot-cost hot-chip" + (s.cost.amount === null ? " hot-unknown" : "") },
        costText(s.cost)) : null,
      tokensIn !== undefined || tokensOut !== undefined ?
        h("span", { className: "hot-chip" }, text(tokensIn) + " → " + text(tokensOut) + " tok") : null),
    h("div", { className: "hot-lane" },
      h("div", { className: "hot-bar" + (kind === "layer" ? " hot-layer" : ""),
        style: { left: left + "%", width: width + "%" }, title: s.name + " " + ms(s.end_ns - s.start_ns) }),
      s.events.map(function (e, i) {
        var at = Math.max(0, Math.min(100, (e.time_ns - t0) / total * 100));
        var cls = e.name === "hermes.middleware.rewrite" ? " hot-rewrite" : isFailure(e) ? " hot-exc" : "";
        return h("div", { key: i, className: "hot-marker" + cls, style: { left: at + "%" },
          title: e.name + (eventText(e) ? ": " + eventText(e) : "") });
      })),
    h("div", { className: "hot-dur hot-num" }, ms(s.end_ns - s.start_ns)));
  }

  function Details(props) {
    var s = props.span;
    if (!s) return h("p", { className: "hot-muted" }, "Click a span for its attributes and events.");
    var keys = Object.keys(s.attributes).sort();
    return h("div", { className: "hot-details" },
      h("h4", null, s.name),
      s.error ? h("p", { className: "hot-bad" }, "error" + (s.status_message ? ": " + s.status_message : "")) : null,
      h("table", { className: "hot-kv" }, h("tbody", null, keys.map(function (k) {
        return h("tr", { key: k }, h("td", { className: "hot-mono" }, k), h("td", { className: "hot-mono" },
          text(s.attributes[k])));
      }))),
      s.events.length ? h("div", null, h("h5", null, "events"), s.events.map(function (e, i) {
        return h("div", { key: i, className: "hot-event" + (e.name === "hermes.middleware.rewrite" ? " hot-rewrite-text" :
          "") }, h("span", { className: "hot-mono" }, e.name + "  +" + ms(e.time_ns - s.start_ns)),
        h("span", null, " " + eventText(e)));
      })) : null);
  }

  function TraceView(props) {
    var state = useState({ data: null, error: "" }), got = state[0], set = state[1];
    var picked = useState(""), selected = picked[0], select = picked[1];
    useEffect(function () {
      var alive = true;
      SDK.fetchJSON(withSource(API + "/traces/" + encodeURIComponent(props.id), props.filters)).then(function (d) {
        if (alive) set({ data: d, error: "" });
      }).catch(function (err) { if (alive) set({ data: null, error: String(err && err.message || err) }); });
      return function () { alive = false; };
    }, [props.id]);
    var back = h("button", { className: "hot-button", onClick: props.onClose }, "← all turns");
    if (!got.data) return h("div", null, back, h("p", { className: "hot-muted" }, got.error || "loading…"));
    var d = got.data, sum = d.summary;
    var spanById = {};
    d.spans.forEach(function (s) { spanById[s.span_id] = s; });
    var failed = d.spans.filter(function (s) { return s.events.some(isFailure); });
    return h("div", { className: "hot-trace" },
      h("div", { className: "hot-head" }, back,
        h("span", { className: "hot-mono" }, d.trace_id),
        h("span", { className: "hot-chip" }, ms(sum.duration_ns)),
        h("span", { className: "hot-chip" }, sum.spans + " spans"),
        h("span", { className: "hot-chip" }, sum.input_tokens + " → " + sum.output_tokens + " tokens"),
        h("span", { className: "hot-chip hot-cost hot-turn-cost" + (sum.cost && sum.cost.amount === null ?
          " hot-unknown" : "") }, "turn cost " + costText(sum.cost)),
        props.jaeger ? h("a", { className: "hot-button hot-jaeger", target: "_blank", rel: "noopener noreferrer",
          href: props.jaeger + "/trace/" + encodeURIComponent(d.trace_id) }, "open in Jaeger ↗") : null),
      failed.length ? h("div", { className: "hot-failures" }, failed.map(function (s) {
        return h("p", { key: s.span_id, className: "hot-bad" }, s.name + ": " + s.events.filter(isFailure).map(
          function (e) { return (e.name === "exception" ? "" : e.name + " ") + eventText(e); }).join("; "));
      })) : null,
      h(Waterfall, { trace: d, selected: selected, onSelect: select }),
      h(Details, { span: spanById[selected] }));
  }

  // A big trace (thousands of spans) scrolls in a box of its own and only the rows in view (and a margin) are
  // drawn: every row has the same height, so which rows are in view follows from the scroll position.
  var ROW = 24, WINDOW_FROM = 300, MARGIN = 30;
  function Waterfall(props) {
    var d = props.trace, spans = d.spans;
    var box = useRef(null);
    var sc = useState(0), scrollTop = sc[0], setScrollTop = sc[1];
    var frame = useRef(0);
    function onScroll() {
      if (frame.current) return;
      frame.current = window.requestAnimationFrame(function () {
        frame.current = 0;
        if (box.current) setScrollTop(box.current.scrollTop);
      });
    }
    function row(s) {
      return h(SpanRow, { key: s.span_id, span: s, start: d.start_ns, end: d.end_ns,
        selected: s.span_id === props.selected, onSelect: props.onSelect });
    }
    if (spans.length < WINDOW_FROM) return h("div", { className: "hot-waterfall" }, spans.map(row));
    var height = box.current ? box.current.clientHeight : 600;
    var first = Math.max(0, Math.floor(scrollTop / ROW) - MARGIN);
    var last = Math.min(spans.length, Math.ceil((scrollTop + height) / ROW) + MARGIN);
    return h("div", { className: "hot-waterfall hot-windowed", ref: box, onScroll: onScroll },
      h("div", { style: { height: first * ROW + "px" } }),
      spans.slice(first, last).map(row),
      h("div", { style: { height: (spans.length - last) * ROW + "px" } }));
  }

  // -- sessions --------------------------------------------------------------------------------------------------

  function Sessions(props) {
    var polled = usePoll(withSource(API + "/sessions", props.filters), props.paused), data = polled.data;
    if (!data) return h("p", { className: "hot-muted" }, polled.error ? "cannot load: " + polled.error : "loading…");
    return h("table", { className: "hot-table" },
      h("thead", null, h("tr", null, ["session", "profile", "turns", "tokens in → out", "cost", "errors", "last turn"]
        .map(function (c) { return h("th", { key: c }, c); }))),
      h("tbody", null, data.sessions.map(function (s) {
        var cost = { amount: s.cost, status: s.cost_status };
        return h("tr", { key: text(s.session) + "/" + text(s.profile), className: "hot-row",
          onClick: function () { props.onSession(s.session || ""); } },
        h("td", { className: "hot-mono" }, text(s.session) || "(none)"), h("td", null, text(s.profile)),
        h("td", { className: "hot-num" }, s.turns), h("td", { className: "hot-num" }, s.input_tokens + " → " +
          s.output_tokens),
        h("td", { className: "hot-num hot-cost" + (s.cost === null ? " hot-unknown" : "") }, costText(cost)),
        h("td", { className: "hot-num" + (s.errors ? " hot-bad" : "") }, s.errors), h("td", null, when(s.last_ns)));
      })));
  }

  // -- the tab ---------------------------------------------------------------------------------------------------------

  function TracesTab() {
    var initial = useRef(readUrl()).current;
    var v = useState(initial.view), view = v[0], setView = v[1];
    var t = useState(initial.trace), trace = t[0], setTrace = t[1];
    var f = useState(initial.filters), filters = f[0], setFilters = f[1];
    var p = useState(false), paused = p[0], setPaused = p[1];
    var srcState = useState({ sources: ["files"], jaeger_url: null }), src = srcState[0], setSrc = srcState[1];
    useEffect(function () {
      SDK.fetchJSON(API + "/sources").then(setSrc).catch(function () {});
    }, []);
    useEffect(function () { writeUrl({ view: view, trace: trace, filters: filters }); }, [view, trace, filters]);
    var body;
    if (trace) {
      body = h(TraceView, { id: trace, filters: filters, jaeger: src.jaeger_url,
        onClose: function () { setTrace(""); } });
    } else if (view === "sessions") {
      body = h(Sessions, { paused: paused, filters: filters, onSession: function (s) {
        setFilters(Object.assign({}, filters, { session: s })); setView("traces");
      } });
    } else {
      body = h("div", null, h(Filters, { filters: filters, onChange: setFilters }),
        h(TraceList, { filters: filters, paused: paused, onOpen: setTrace }));
    }
    return h("div", { className: "hot-root" },
      h("div", { className: "hot-bar-top" },
        h("div", { className: "hot-tabs" },
          h("button", { className: "hot-button" + (view === "traces" && !trace ? " hot-active" : ""),
            onClick: function () { setTrace(""); setView("traces"); } }, "Traces"),
          h("button", { className: "hot-button" + (view === "sessions" && !trace ? " hot-active" : ""),
            onClick: function () { setTrace(""); setView("sessions"); } }, "Sessions")),
        src.sources.length > 1 ? h("select", { className: "hot-input hot-source", value: filters.source || "files",
          onChange: function (e) {
            setTrace(""); setFilters(Object.assign({}, filters, { source: e.target.value === "jaeger" ? "jaeger" : "" }));
          } }, h("option", { value: "files" }, "local files"), h("option", { value: "jaeger" }, "Jaeger")) : null,
        h("button", { className: "hot-button hot-pause", onClick: function () { setPaused(!paused); } },
          paused ? "▶ resume" : "❚❚ pause"),
        h("span", { className: "hot-muted" }, paused ? "paused" : "live")),
      body);
  }

  PLUGINS.register("hermes_otel", TracesTab);
})();
