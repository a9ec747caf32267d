"""A tool that downloads the URL the model gives it with httpx, as web and vision tools do."""

import json

SCHEMA = {
    "name": "fetch_url",
    "description": "Download a URL and return its status and length.",
    "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
}


def fetch_url(args, **_kw):
    import httpx

    response = httpx.get(args["url"], timeout=10)
    return json.dumps({"status": response.status_code, "length": len(response.content)})


def register(ctx):
    ctx.register_tool(name="fetch_url", toolset="fetcher", schema=SCHEMA, handler=fetch_url,
                      description=SCHEMA["description"])
