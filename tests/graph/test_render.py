"""What the renderers do with text a pipeline chooses: quoted, escaped, never markup."""

from __future__ import annotations

from pathlib import Path

from converge_dsl.graph import FORMATS, graph_pipeline, recognise, render
from converge_dsl.graph._dot import quote
from converge_dsl.graph._mermaid import escape

HOSTILE = """apiVersion: converge-dsl/v1
kind: Pipeline
name: hostile
description: "</script><script>alert(1)</script> & <b>bold</b>"
keys:
  - {name: notes, description: "<img src=x onerror=alert(2)> \\"quoted\\" # hash"}
seeds:
  - {id: first, key: notes, content: "a note"}
suggestors:
  - name: copy
    kind: rule
    dependencies: [notes]
    emit:
      - {key: strategies, id: s, content: "</script>", confidence: 0.9}
invariants:
  - name: quoted
    class: acceptance
    check: "fact(\\"notes\\", \\"first\\") is not none and count('notes') < 9"
"""


def _graph(tmp_path: Path) -> str:
    path = tmp_path / "hostile.yaml"
    path.write_text(HOSTILE, encoding="utf-8")
    return str(path)


def test_mermaid_labels_use_html_entities() -> None:
    assert escape('a "b" <c> #d; & e') == "a &quot;b&quot; &lt;c&gt; &num;d; &amp; e"


def test_dot_strings_escape_quotes_and_backslashes() -> None:
    assert quote('say "hi" \\ there\nnext') == '"say \\"hi\\" \\\\ there\\nnext"'


def test_html_never_carries_pipeline_text_as_markup(tmp_path: Path) -> None:
    graph = graph_pipeline(Path(_graph(tmp_path)), inputs={})
    page = render(graph, "html")
    assert "<script>alert" not in page
    assert "<img src=x" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page  # the description, as text
    assert page.count("</script>") == 2  # the data block's and the script's own
    script = (Path(__file__).resolve().parents[2] / "converge_dsl/graph/page.js").read_text()
    assert "innerHTML" not in script  # details are built with textContent


def test_html_allows_its_own_style_and_script_only(tmp_path: Path) -> None:
    from converge_dsl._page_assets import CONTENT_SECURITY_POLICY

    page = render(graph_pipeline(Path(_graph(tmp_path)), inputs={}), "html")
    policy = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
    assert policy in page.split("</head>")[0]
    assert CONTENT_SECURITY_POLICY.startswith("default-src 'none';")


def test_html_shows_control_and_bidi_characters_as_escapes(tmp_path: Path) -> None:
    path = tmp_path / "bidi.yaml"
    sneaky = "read me \\u202e(at a.yaml:1:2) \\x1b[31m"  # YAML escapes: the characters themselves
    path.write_text(HOSTILE.replace("& <b>bold</b>", sneaky), encoding="utf-8")
    page = render(graph_pipeline(path, inputs={}), "html")
    assert "\u202e" not in page
    assert "\x1b" not in page
    assert "read me \\u202e(at a.yaml:1:2) \\x1b[31m" in page  # the description, escaped


def test_a_pipeline_on_one_long_line_gives_each_node_a_cut_excerpt(tmp_path: Path) -> None:
    import json
    import re

    from converge_dsl._long_lines import EXCERPT_LINE_CHARS

    pipeline = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "wide",
        "description": "x" * 200_000,
        "keys": [{"name": "notes"}],
        "seeds": [{"id": "first", "key": "notes", "content": "a note"}],
        "suggestors": [
            {"name": "copy", "kind": "rule", "dependencies": ["notes"],
             "emit": [{"key": "strategies", "id": "s", "content": "c"}]},
        ],
    }  # fmt: skip
    path = tmp_path / "wide.yaml"
    path.write_text(json.dumps(pipeline), encoding="utf-8")  # JSON is YAML: one line
    page = render(graph_pipeline(path, inputs={}), "html")
    assert len(page) < 300_000  # the description once, not once more per node
    found = re.search(r'id="graph-data">(.*?)</script>', page, re.S)
    assert found is not None
    nodes = json.loads(found.group(1))["nodes"]
    (line,) = nodes["suggestor:copy"]["source"]["lines"]
    assert line.startswith("\u2026")  # cut before the node (it ends the line: not after)
    assert len(line) == EXCERPT_LINE_CHARS
    assert '{"name": "copy", "kind": "rule"' in line  # the node's own text, not the file's start


def test_mermaid_and_dot_keep_the_invariant_text(tmp_path: Path) -> None:
    graph = graph_pipeline(Path(_graph(tmp_path)), inputs={})
    mermaid, dot = render(graph, "mermaid"), render(graph, "dot")
    quoted = "fact(&quot;notes&quot;, &quot;first&quot;) is not none and count('notes') &lt; 9"
    assert quoted in mermaid
    assert 'fact(\\"notes\\", \\"first\\") is not none' in dot


def test_every_format_starts_with_a_line_recognise_accepts(tmp_path: Path) -> None:
    graph = graph_pipeline(Path(_graph(tmp_path)), inputs={})
    for format in FORMATS:
        first = render(graph, format).split("\n", 1)[0].encode()
        assert recognise(first), format
    assert not recognise(b"<!DOCTYPE html>")
    assert not recognise(b'{"graph": "something else"}')
    assert not recognise(b"digraph G {")


def test_the_html_summary_counts_in_words(tmp_path: Path) -> None:
    graph = graph_pipeline(Path(_graph(tmp_path)), inputs={})
    page = render(graph, "html")
    assert "1 suggestor · 2 keys · 0 models · 0 packs" in page


def test_a_long_name_is_cut_on_its_node_and_whole_in_its_title(tmp_path: Path) -> None:
    from converge_dsl.graph._layout import size_of
    from converge_dsl.graph._text import LABEL_CHARS

    path = tmp_path / "long.yaml"
    long = "n" + "y" * 199
    path.write_text(HOSTILE.replace("name: copy", f"name: {long}"), encoding="utf-8")
    graph = graph_pipeline(path, inputs={})
    page = render(graph, "html")
    cut = long[: LABEL_CHARS - 1] + "\u2026"
    assert f">{cut}</text>" in page
    assert f"<title>{long}: rule</title>" in page
    node = next(n for n in graph.nodes if n.name == long)
    assert size_of(node)[0] < 500  # it was 1,614 pixels wide


def test_a_long_name_is_cut_between_grapheme_clusters() -> None:
    # Cut at its 47th character, a name split the family that straddled it: a man, a
    # joiner and "…" (the page showed a man and a box). A sequence is kept whole or left out.
    from converge_dsl.graph._model import Node
    from converge_dsl.graph._text import LABEL_CHARS, label_name

    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    for before in range(40, 48):
        node = Node("suggestor:x", "suggestor", "x" * before + family * 3, "rule", True)
        label = label_name(node)
        assert label == "x" * before + family * ((LABEL_CHARS - 1 - before) // 5) + "\u2026"


def _details(page: str) -> dict[str, dict[str, str]]:
    """Each node's details, by id, as the HTML page's data holds them."""
    import json
    import re

    found = re.search(r'id="graph-data">(.*?)</script>', page, re.S)
    assert found is not None
    nodes = json.loads(found.group(1))["nodes"]
    return {node: dict(item["details"]) for node, item in nodes.items()}


def test_the_details_that_name_things_show_each_name_as_names_show(tmp_path: Path) -> None:
    # An invariant's "reads", an agent's tools, contributors and summarizer model joined
    # the raw names: a key holding a real U+202E read `tick\u202eets`, the shown form of
    # the key holding those six characters (and that key's showed as the first one's).
    from .test_browser import _PLAIN, _renamed

    source = tmp_path / "hidden.yaml"
    source.write_text(_PLAIN, encoding="utf-8")
    details = _details(render(_renamed(graph_pipeline(source, inputs={})), "html"))
    assert (
        details["invariant:0"]["reads"]
        == "tick\u27e8U+202E\u27e9ets, tick\u27e8U+27E8\u27e9U+202E\u27e9ets"
    )
    assert details["key:tick\u27e8U+202E\u27e9ets"]["read by"] == "z\u27e8U+200B\u27e9z"
    hidden = {"finish": "fin\u202eish", "default": "def\u200bault", "remind-goal": "re\u202emind"}
    agents = Path(__file__).resolve().parents[2] / "pipelines" / "agent-review.yaml"
    graph = _renamed(graph_pipeline(agents, inputs={}), hidden)
    agent = _details(render(graph, "html"))["suggestor:reviewer"]
    assert agent["tools"] == "context.read, context.propose, fin\u27e8U+202E\u27e9ish"
    assert agent["contributors"].startswith("re\u27e8U+202E\u27e9mind (reminder), ")
    assert agent["summarizer"] == "model def\u27e8U+200B\u27e9ault, clears turns older than 2"
    assert agent["models"] == "def\u27e8U+200B\u27e9ault"


def test_a_name_with_hidden_characters_is_sized_and_cut_as_it_is_drawn() -> None:
    # The node was sized from the raw name (60 characters) but drawn as its shown form,
    # each hidden character as its eight-character `⟨U+200B⟩`: 270 characters in a box
    # for 48. The label is cut in the shown form, never inside a notation.
    from converge_dsl._page_assets import page_name
    from converge_dsl.graph._layout import size_of
    from converge_dsl.graph._model import Node
    from converge_dsl.graph._text import LABEL_CHARS, label_name

    node = Node("suggestor:x", "suggestor", "a\u200b" * 30, "rule", True)
    label = label_name(node)
    assert len(label) <= LABEL_CHARS
    assert label.endswith("\u2026")
    assert page_name(node.name).startswith(label[:-1])
    head = label[:-1]
    assert head.rfind("\u27e8") < head.rfind("\u27e9")  # each notation whole
    assert size_of(node)[0] >= len(label) * 7.9  # its box holds the label drawn
