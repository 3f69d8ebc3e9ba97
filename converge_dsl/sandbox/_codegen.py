"""One parse and one code generation per template, with the names it reads found on the way.

The sandbox (`converge_dsl.sandbox._templating`) compiles templates and expressions
with these helpers, given its environment:

- `parse(env, source, expression=...)`: the Jinja AST of a template, or of a
  bare expression exactly as `Environment.compile_expression` reads it (the
  value assigned to `result`);
- `generate(env, ast) -> Generated`: the Python code object of the template,
  made by `BoundedCodeGenerator` (which routes `~` and comparisons through size
  checks and counts `for` iterations), and the free names the template reads
  from its context, collected by that same generator as Jinja's own
  `meta.find_undeclared_variables` collects them (so a template is parsed and
  code-generated once, not once more to list its names). The AST is consumed:
  the generator rewrites `for` loops in place;
- `refusal(ast)`: the first part of a template that fails whenever it runs,
  whatever the data (a `{% include %}`, a call of a literal, `'%'` formatting
  of a literal text), which `generate` refuses and `validate` reports alike;
- `literal_text(source)`: the output of a template with no Jinja syntax, found
  without Jinja (`f12`, `x`, a prompt without blocks), else None.

Errors are Jinja's (`jinja2.TemplateSyntaxError`); the caller translates them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import CodeType
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.nodes
import jinja2.parser

from ._template_escapes import quiet_escapes

__all__ = [
    "BoundedCodeGenerator",
    "Generated",
    "folding_failure",
    "generate",
    "literal_text",
    "parse",
    "parse_source",
    "refusal",
]

# What makes a text a template (a line statement prefix is not configured).
_DELIMITERS = ("{{", "{%", "{#")


class BoundedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Routes `~` and comparisons through size checks and counts `for` iterations.

    Also collects `undeclared`: the names the template reads from its context.
    `revision` goes up whenever the code it generates for a source changes: the
    compile cache's key holds it (`converge_dsl.compiler._compile_cache`).
    """

    # 2: a slice of a constant goes through `environment.getitem`; 3: `refusal`; 4: of a
    # folded constant too
    revision = 4

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.undeclared: set[str] = set()

    def enter_frame(self, frame: jinja2.compiler.Frame) -> None:
        super().enter_frame(frame)
        for action, param in frame.symbols.loads.values():
            if action == "resolve" and param not in self.environment.globals:
                self.undeclared.add(param)

    def visit_Compare(self, node: jinja2.nodes.Compare, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.bounded_compare(")
        self.visit(node.expr, frame)
        for op in node.ops:
            self.write(f", ({op.op!r}, ")
            self.visit(op.expr, frame)
            self.write(")")
        self.write(")")

    def visit_For(self, node: jinja2.nodes.For, frame: jinja2.compiler.Frame) -> None:
        node.iter = jinja2.nodes.Call(
            jinja2.nodes.EnvironmentAttribute("counted"), [node.iter], [], None, None
        )
        super().visit_For(node, frame)

    def visit_Getitem(self, node: jinja2.nodes.Getitem, frame: jinja2.compiler.Frame) -> None:
        # Jinja writes a slice as Python's `x[a:b]`; of a constant that cannot be sliced
        # (`1[0:1]`, `(-1)[0:1]`: Python folds what Jinja folds) Python's compiler warns on
        # the process's stderr. A slice of a constant goes through `environment.getitem`
        # instead, and fails when run as `2[0]` does.
        if not (isinstance(node.arg, jinja2.nodes.Slice) and _folds(node.node, frame)):
            super().visit_Getitem(node, frame)
            return
        self.write("environment.getitem(")
        self.visit(node.node, frame)
        self.write(", slice(")
        for part in (node.arg.start, node.arg.stop, node.arg.step):
            if part is None:
                self.write("None")
            else:
                self.visit(part, frame)
            self.write(", ")
        self.write("))")

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _folds(node: jinja2.nodes.Expr, frame: jinja2.compiler.Frame) -> bool:
    """Whether Jinja folds `node` into a constant (`-1`, `1 + 2`) as it generates code."""
    try:
        node.as_const(frame.eval_ctx)
    except Exception:  # `Impossible`, or what folding it raised: not folded
        return False
    return True


@dataclass(frozen=True, slots=True)
class Generated:
    """A generated template: its code (None when generation failed) and the names it reads.

    `error` is the generator's refusal (an unknown filter or test, ...): the
    names read before it are still known, so an unknown name is reported first.
    """

    code: CodeType | None
    names: frozenset[str]
    error: jinja2.TemplateSyntaxError | None = None


def parse_source(
    env: jinja2.Environment, source: str, *, expression: bool
) -> jinja2.nodes.Template | jinja2.nodes.Expr:
    """The AST of a template, or the expression alone exactly as `compile_expression`
    reads it; raises `TemplateSyntaxError`. The one parse of the compiler (`parse`) and
    of validate (`frontend._jinja_parse`), without the lexer's warning of an unknown
    escape (`_template_escapes`)."""
    with quiet_escapes():
        if not expression:
            return env.parse(source)
        parser = jinja2.parser.Parser(env, source, state="variable")
        expr = parser.parse_expression()
        if not parser.stream.eos:
            raise jinja2.TemplateSyntaxError(
                "chunk after expression", parser.stream.current.lineno, None, None
            )
    return expr


def parse(env: jinja2.Environment, source: str, *, expression: bool) -> jinja2.nodes.Template:
    """The AST of a template, or of an expression as `compile_expression` reads it."""
    expr = parse_source(env, source, expression=expression)
    if isinstance(expr, jinja2.nodes.Template):
        return expr
    expr.set_environment(env)
    body = [jinja2.nodes.Assign(jinja2.nodes.Name("result", "store"), expr, lineno=1)]
    return jinja2.nodes.Template(body, lineno=1)


def folding_failure(exc: jinja2.TemplateRuntimeError) -> str:
    """The message for a constant part that always fails.

    Jinja folds constant parts while it generates code; one that always fails
    (`[0]['m'] and x`: an undefined value tested for truth) raises then. The
    compiler (`generate`) and `validate` (`frontend._jinja_parse`) say it alike.
    """
    return f"a constant part always fails: {exc}"


# The statements that read another template: the sandbox has no loader, so they always fail.
_LOADS: dict[type[jinja2.nodes.Node], str] = {
    jinja2.nodes.Extends: "extends",
    jinja2.nodes.Include: "include",
    jinja2.nodes.Import: "import",
    jinja2.nodes.FromImport: "from ... import",
}
_LITERALS = (jinja2.nodes.Const, jinja2.nodes.List, jinja2.nodes.Dict, jinja2.nodes.Tuple)
_REFUSED_NODES: tuple[type[jinja2.nodes.Node], ...] = (*_LOADS, jinja2.nodes.Call, jinja2.nodes.Mod)
_NOT_CALLABLE = "a literal (a number, text, list...) is not callable; remove the '(...)' after it"


def refusal(ast: jinja2.nodes.Template) -> tuple[str, int] | None:
    """(message, line) of the first part of `ast` that fails whenever it runs, else None.

    Such a part fails the same way with any data, so the compiler refuses it
    (`generate`) and `validate` reports it (`frontend._jinja_parse`) before a
    run reaches it: a statement that reads another template (there is none to
    read), a call of a literal (`3(1)`) and `'%'` formatting of a literal text
    (`"%s" % x`, refused by `_limits.check_binop` at run time). Wherever it
    stands: a branch that never runs included, as which branches run is not known
    before the run.
    """
    for node in ast.find_all(_REFUSED_NODES):
        keyword = _LOADS.get(type(node))
        if keyword is not None:
            why = "a template reads no other; write the text in place"
            return f"'{{% {keyword} %}}' is not available: {why}", node.lineno
        if isinstance(node, jinja2.nodes.Call) and isinstance(node.node, _LITERALS):
            return _NOT_CALLABLE, node.lineno
        if (
            isinstance(node, jinja2.nodes.Mod)
            and isinstance(node.left, jinja2.nodes.Const)
            and isinstance(node.left.value, str)
        ):
            return "'%' string formatting is refused; use filters instead", node.lineno
    return None


def generate(env: jinja2.Environment, ast: jinja2.nodes.Template) -> Generated:
    """Generate and compile the code of `ast` (consumed), collecting the names it reads."""
    generator = env.code_generator_class(env, None, "<template>", None, False, env.optimized)
    names: set[str] = getattr(generator, "undeclared", set())
    # Read before the generator folds constants in place: `validate` reads the tree as parsed.
    refused = refusal(ast)
    try:
        generator.visit(ast)
    except jinja2.TemplateSyntaxError as exc:
        return Generated(None, frozenset(names) - set(env.globals), exc)
    except jinja2.TemplateRuntimeError as exc:
        failure = jinja2.TemplateSyntaxError(folding_failure(exc), 1)
        return Generated(None, frozenset(names) - set(env.globals), failure)
    if refused is not None:
        return Generated(
            None, frozenset(names) - set(env.globals), jinja2.TemplateSyntaxError(*refused)
        )
    stream: Any = generator.stream  # a StringIO when no stream is given
    code = compile(stream.getvalue(), "<template>", "exec")
    return Generated(code, frozenset(names) - set(env.globals))


def literal_text(source: str, max_size: int) -> str | None:
    """The output of `source` when it has no Jinja syntax (and no `\\r`), else None.

    Jinja outputs such a text as it is, less one trailing newline (the
    environment does not keep it); a text past `max_size` is left to Jinja,
    whose output bound refuses it.
    """
    if "\r" in source or len(source) > max_size or any(m in source for m in _DELIMITERS):
        return None
    return source[:-1] if source.endswith("\n") else source
