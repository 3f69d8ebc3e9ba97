"""The helpdesk example's MCP server: tickets and knowledge-base articles from a JSON file.

A small server built with the `mcp` SDK's FastMCP, run over stdio by
pipelines/helpdesk.yaml (`python3 helpdesk/server.py helpdesk/articles.json`).
`get_ticket` answers one ticket by id; `search_articles` ranks the articles by
how many words of the query their title, summary and tags share (ties by id),
so the same query always gets the same answer.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import FastMCP

DATA: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
server = FastMCP("helpdesk", log_level="WARNING")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@server.tool()
def get_ticket(ticket_id: str) -> dict[str, Any]:
    """The ticket with this id: its id, title, description and product."""
    for ticket in DATA["tickets"]:
        if ticket["id"] == ticket_id:
            return dict(ticket)
    raise ValueError(f"no ticket {ticket_id!r}")


@server.tool()
def search_articles(query: str, limit: int = 2) -> list[dict[str, Any]]:
    """The knowledge-base articles that best match the query (id, title, summary)."""
    wanted = _words(query)
    scored = []
    for article in DATA["articles"]:
        text = " ".join([article["title"], article["summary"], *article["tags"]])
        score = len(wanted & _words(text))
        if score:
            scored.append((-score, article["id"], article))
    scored.sort(key=lambda found: (found[0], found[1]))
    return [
        {"id": a["id"], "title": a["title"], "summary": a["summary"]} for _, _, a in scored[:limit]
    ]


if __name__ == "__main__":
    server.run("stdio")
