"""One Jinja parse per template, shared by every template check.

`parse(text, expression)` parses a template (or a bare expression, exactly as
`converge_dsl.sandbox.compile_expression` reads it) in the shared sandboxed
environment and caches the AST, so the name checks and the data-field checks
read one tree. `free_names(ast)` is Jinja's own free-name analysis, run in an
environment that knows every filter and test name: Jinja's code generator
fails on an unknown filter or test, which the front end reports itself.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import nodes

ParseResult = tuple["nodes.Template | None", tuple[str, int | None] | None]


@lru_cache(maxsize=4096)
def parse(text: str, expression: bool) -> ParseResult:
    """(the AST, None); (None, (message, line within the template)) when it does not parse;
    (the AST, (message, line)) when it parses but does not compile (the sandbox's
    `refusal`, `_folding_failure`)."""
    import jinja2
    from jinja2 import nodes

    from converge_dsl.sandbox import environment, parse_source, refusal

    env = environment()
    try:
        parsed = parse_source(env, text, expression=expression)
    except jinja2.TemplateSyntaxError as exc:
        return None, (exc.message or "syntax error", exc.lineno)
    if isinstance(parsed, nodes.Template):
        ast = parsed
    else:
        ast = nodes.Template([nodes.Output([parsed], lineno=1)], lineno=1)
        ast.set_environment(env)
    return ast, refusal(ast) or _folding_failure(ast, env)


def _folding_failure(ast: nodes.Template, env: Any) -> tuple[str, int | None] | None:
    """The error Jinja raises when it folds the constant parts of `ast` as it compiles.

    The compiler (`converge_dsl.sandbox._codegen.generate`) refuses such a part in the same words.
    """
    import copy

    import jinja2
    from jinja2.optimizer import optimize

    from converge_dsl.sandbox import folding_failure

    try:
        optimize(copy.deepcopy(ast), env)  # the optimizer rewrites the tree it is given
    except jinja2.TemplateRuntimeError as exc:
        return folding_failure(exc), getattr(exc, "lineno", None) or 1
    return None


class _AnyName(dict[str, Any]):
    """A filter or test table that has every name (for name analysis only)."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, _placeholder)


def _placeholder(*args: Any, **kwargs: Any) -> None:
    return None


@lru_cache(maxsize=1)
def _analysis_environment() -> Any:
    """An environment in which the code generator folds no operator, filter or test.

    The generator folds constant parts as it visits them; a plain environment would
    run Python's operators and Jinja's own filters on them, unbounded (`('ab' *
    300000000)|upper` held gigabytes while `validate` only looked for names). Every
    operator is intercepted (a sandboxed environment then folds none) and every filter
    and test is a placeholder: only literals fold.
    """
    import jinja2.sandbox

    class _Analysis(jinja2.sandbox.SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "/", "//", "**", "%", "+", "-"})
        intercepted_unops = frozenset({"not", "+", "-"})

    env = _Analysis()
    env.globals = {}  # free names include the sandbox's globals, as Jinja's own analysis does
    env.filters = _AnyName()
    env.tests = _AnyName()
    return env


def free_names(ast: nodes.Template) -> frozenset[str]:
    """The names `ast` reads from its context (Jinja's analysis, unknown filters allowed).

    The code generator folds constant parts of the tree it visits in place (a
    filter in a call's keyword argument), so it visits a copy: `ast` is the
    shared parse of every template check.
    """
    import copy

    from jinja2.meta import TrackingCodeGenerator

    codegen = TrackingCodeGenerator(_analysis_environment())
    codegen.visit(copy.deepcopy(ast))
    return frozenset(codegen.undeclared_identifiers)


@lru_cache(maxsize=1)
def known_tests() -> frozenset[str]:
    """The tests (`x is defined`, ...) the sandboxed environment offers."""
    from converge_dsl.sandbox import environment

    return frozenset(environment().tests)
