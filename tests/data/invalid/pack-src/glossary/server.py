"""A FastMCP glossary: `define(word)` answers the word and its meaning as JSON, and
appends the word to the file GLOSSARY_COUNT names (when set)."""

import json
import os

from mcp.server.fastmcp import FastMCP

MEANINGS = {"alpha": "the first letter", "beta": "the second letter"}
server = FastMCP("glossary", log_level="WARNING")


@server.tool()
def define(word: str) -> str:
    """The word and its meaning, as JSON."""
    count = os.environ.get("GLOSSARY_COUNT")
    if count:
        with open(count, "a", encoding="utf-8") as out:
            out.write(word + "\n")
    return json.dumps({"word": word, "meaning": MEANINGS.get(word, "unknown")})


if __name__ == "__main__":
    server.run("stdio")
