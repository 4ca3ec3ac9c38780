"""Drives `tecs-profile mcp` with the reference MCP client (PyPI's `mcp`):
the handshake, tools/list, and the tools called with the arguments given
as JSON on the command line. Prints one JSON object: the protocol version,
the tool names, and each call's text, structured content, error flag and
the progress notifications it received (`[progress, total, message]` each:
every call asks for them with a progress token).

    python mcp_client.py LUAJIT TECS_PROFILE_BIN '[["list_targets", {}], ...]'
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(luajit, cli, calls):
    # The client passes a server only a few variables unless told; the
    # control directory and the Lua paths are the test's.
    params = StdioServerParameters(command=luajit, args=[cli, "mcp"], env=dict(os.environ))
    out = {"calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["protocolVersion"] = init.protocolVersion
            out["server"] = init.serverInfo.name
            tools = await session.list_tools()
            out["tools"] = [t.name for t in tools.tools]
            for name, args in calls:
                progress = []

                async def on_progress(done, total, message, progress=progress):
                    progress.append([done, total, message])

                result = await session.call_tool(name, args, progress_callback=on_progress)
                out["calls"].append({
                    "progress": progress,
                    "name": name,
                    "text": "".join(c.text for c in result.content if c.type == "text"),
                    "structured": result.structuredContent,
                    "isError": bool(result.isError),
                })
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
