"""The gralkor MCP server driven by the official Python MCP SDK (`mcp` on PyPI).

Run by cli/tests/python_sdk.rs, which provisions the SDK into ~/.cache/gralkor and
puts it on PYTHONPATH:

    python3 mcp_sdk_client.py stdio GRALKOR_BIN DATA_DIR
    python3 mcp_sdk_client.py http URL

Prints one line per checked step and `N passed, 0 failed` at the end; any failed
check raises (exit 1).
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters

EXPECTED = [
    "memory_search",
    "memory_add",
    "memory_get",
    "memory_forget",
    "memory_status",
    "memory_recent",
    "memory_build_indices",
    "memory_build_communities",
]
NOT_STRICT = ["oneOf", "allOf", "not", "if", "then", "else", "default",
              "patternProperties", "dependentRequired", "dependentSchemas"]

checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise AssertionError(what)
    checks += 1
    print(f"ok - {what}", flush=True)


def strict_violations(path, schema):
    """The strict-mode rules (OpenAI `strict: true`) a schema breaks."""
    out = []
    for keyword in NOT_STRICT:
        if keyword in schema:
            out.append(f"{path}: uses {keyword}")
    if "anyOf" in schema:
        for i, branch in enumerate(schema["anyOf"]):
            out += strict_violations(f"{path}.anyOf[{i}]", branch)
        return out
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    if not types:
        out.append(f"{path}: no type")
    if "enum" in schema and "null" in types and None not in schema["enum"]:
        out.append(f"{path}: nullable enum without null")
    if "object" in types:
        props = schema.get("properties")
        if props is None:
            return out + [f"{path}: object without properties"]
        if schema.get("additionalProperties") is not False:
            out.append(f"{path}: additionalProperties is not false")
        if sorted(schema.get("required", [])) != sorted(props):
            out.append(f"{path}: required is not every property")
        for name, prop in props.items():
            out += strict_violations(f"{path}.{name}", prop)
    if "array" in types:
        if "items" not in schema:
            out.append(f"{path}: array without items")
        else:
            out += strict_violations(f"{path}[]", schema["items"])
    return out


async def exercise(client):
    tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    check(names == EXPECTED, f"the tools are listed: {names}")
    for t in tools:
        violations = strict_violations(t.name, t.input_schema)
        check(t.input_schema.get("type") == "object" and not violations,
              f"{t.name}: strict-mode schema {violations}")
    by_name = {t.name: t for t in tools}
    check(by_name["memory_search"].annotations.read_only_hint is True,
          "memory_search is read-only")
    check(by_name["memory_forget"].annotations.destructive_hint is True,
          "memory_forget is destructive")

    content = "Grace keeps a sourdough starter named Clint"
    ids = []
    for _ in range(3):
        added = await client.call_tool("memory_add", {
            "content": content, "source_kind": None,
            "source_description": None, "idempotency_key": None})
        check(not added.is_error, f"memory_add answers: {added.content}")
        ids.append(added.structured_content["id"])
    check(len(set(ids)) == 1 and ids[0], f"three identical adds are one episode: {ids}")
    episode = ids[0]
    check(episode in added.content[0].text, "the id is in the text the model reads")

    recent = await client.call_tool("memory_recent", {"destination": None, "limit": 20})
    same = [e for e in recent.structured_content["episodes"] if e["content"] == content]
    check(len(same) == 1 and same[0]["id"] == episode,
          f"memory_recent lists one episode: {same}")

    found = await client.call_tool("memory_search", {
        "query": "sourdough starter", "destinations": None, "lenses": None, "as_of": None})
    hits = [r for r in found.structured_content["results"] if episode in r["episodes"]]
    check(hits and hits[0]["valid_at"] and hits[0]["created_at"],
          f"memory_search finds it with its id and times: {hits}")

    got = await client.call_tool("memory_get", {"id": episode, "destination": None})
    check(not got.is_error and got.structured_content["episode"]["content"] == content,
          "memory_get reads it by id")

    bad = await client.call_tool("memory_search", {"query": 42})
    check(bad.is_error and "memory_search.arguments" in bad.content[0].text,
          f"a bad argument is an isError result naming the field: {bad.content[0].text}")
    bad = await client.call_tool("memory_get", {"id": "not-a-uuid", "destination": None})
    check(bad.is_error and bad.structured_content["error"]["field"] == "memory_get.arguments.id",
          "a malformed id is an isError result naming memory_get.arguments.id")

    forgot = await client.call_tool("memory_forget", {
        "id": episode, "destination": None, "session": None})
    check(not forgot.is_error and forgot.structured_content["id"] == episode,
          "memory_forget forgets it by id")
    gone = await client.call_tool("memory_get", {"id": episode, "destination": None})
    check(gone.is_error and gone.structured_content["error"]["kind"] == "not_found",
          "memory_get of a forgotten episode is not_found")


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        server = StdioServerParameters(
            command=sys.argv[2],
            args=["--text-only", "--operator", "grace", "mcp"],
            env={"GRALKOR_DATA_DIR": sys.argv[3]},
        )
    else:
        server = sys.argv[2]
    async with Client(server, read_timeout_seconds=120) as client:
        print(f"# protocol {client.protocol_version}", flush=True)
        await exercise(client)
    print(f"{checks} passed, 0 failed", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
