"""Drives `tecs-profile mcp` with PyPI's MCP client, 1.x or 2.x, as an agent
would: connects in MODE ("legacy": the initialize handshake; "2026-07-28":
the stateless revision, 2.x only), lists the tools, calls each of CALLS
(a JSON list of [name, arguments]) asking for progress, reads every
resource a result links to, and lists the resources. Prints one JSON
object: the revision, the server's name, the tool names, each call's text,
structured content, error flag, resource links, progress notifications
(`[progress, total, message]`) or the error the client raised, and each
read's media type and contents.

    python mcp_client.py MODE LUAJIT TECS_PROFILE_BIN CALLS
"""
import asyncio
import importlib.metadata
import json
import os
import sys

from mcp import StdioServerParameters

VERSION = importlib.metadata.version("mcp")
MAJOR = int(VERSION.split(".")[0])


def wire(model):
    """A result as it was on the wire (both majors' models dump to it)."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def failure(e):
    error = getattr(e, "error", None)
    return {"type": type(e).__name__, "code": getattr(error, "code", None),
            "message": getattr(error, "message", None) or str(e)}


async def session_calls(list_tools, call_tool, read_resource, list_resources, calls, out):
    listed = wire(await list_tools())
    out["tools"] = [t["name"] for t in listed["tools"]]
    if out.get("server") is None:
        # A stateless client that adopted the revision without asking
        # server/discover: the name every result carries.
        out["server"] = listed.get("_meta", {}).get("io.modelcontextprotocol/serverInfo", {}).get("name")
    links = []
    for name, args in calls:
        progress = []

        async def on_progress(done, total, message, progress=progress):
            progress.append([done, total, message])

        call = {"name": name, "progress": progress}
        try:
            r = wire(await call_tool(name, args, progress_callback=on_progress))
        except Exception as e:  # the client's own error: what an agent would see
            call["error"] = failure(e)
        else:
            call["text"] = "".join(c.get("text", "") for c in r["content"] if c["type"] == "text")
            call["links"] = [c for c in r["content"] if c["type"] == "resource_link"]
            call["structured"] = r.get("structuredContent")
            call["isError"] = bool(r.get("isError"))
            links.extend(call["links"])
        out["calls"].append(call)
    out["reads"] = []
    for link in links:
        read = {"uri": link["uri"]}
        try:
            contents = wire(await read_resource(link["uri"]))["contents"]
            read["contents"] = contents
        except Exception as e:
            read["error"] = failure(e)
        out["reads"].append(read)
    out["resources"] = wire(await list_resources())["resources"]


async def main(mode, luajit, cli, calls):
    # The client passes a server only a few variables unless told; the
    # control directory and the Lua paths are the test's.
    params = StdioServerParameters(command=luajit, args=[cli, "mcp"], env=dict(os.environ))
    out = {"client": "mcp %s (%s)" % (VERSION, mode), "calls": []}
    if MAJOR >= 2:
        from mcp import Client

        async with Client(params, mode=mode) as client:
            out["protocolVersion"] = client.protocol_version
            info = client.session.server_info
            out["server"] = info.name if info else None
            await session_calls(client.list_tools, client.call_tool, client.read_resource, client.list_resources,
                                calls, out)
    else:
        if mode != "legacy":
            raise SystemExit("mcp %s speaks only the handshake revisions" % VERSION)
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client
        from pydantic import AnyUrl

        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out["protocolVersion"] = init.protocolVersion
                out["server"] = init.serverInfo.name
                await session_calls(session.list_tools, session.call_tool,
                                    lambda uri: session.read_resource(AnyUrl(uri)), session.list_resources,
                                    calls, out)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
