"""Mutation operators: where a single-site bug can be planted in a module, and how.

A *site* is one AST node an operator applies to.  Sites are found by one deterministic walk
of the module, so a mutant's identity — file, enclosing function, operator, and its ordinal
among that function's sites of the same operator — survives edits elsewhere in the file.

A mutant is applied as a *text* edit: the node's source segment is replaced by the mutated
node's source, so every other line (and its number) stays as written.

The operators are the classic single-site ones that model real slips in guard code:
comparison boundaries and negations, ``and``/``or``, dropped ``not``, negated conditions,
off-by-one constants, ``+``/``-``, flipped booleans, and deleted statements (a missing
``raise``, call or assignment).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

import attrs

COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}

ARITH_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
}


@attrs.frozen
class Site:
    """One mutation: where (file, line, enclosing function), what, and the edit."""

    path: str
    function: str
    operator: str
    ordinal: int
    line: int
    end_line: int
    col: int
    end_col: int
    original: str
    replacement: str

    @property
    def key(self) -> str:
        return f"{self.path}:{self.function}:{self.operator}#{self.ordinal}"

    def describe(self) -> str:
        return f"{self.path}:{self.line} {self.operator}: {self.original!r} -> {self.replacement!r}"


def _is_docstring(node: ast.stmt, parent_body: list[ast.stmt]) -> bool:
    return (
        bool(parent_body)
        and parent_body[0] is node
        and isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _skipped_function(node: ast.AST) -> bool:
    """Code whose mutants say nothing about behaviour: reprs, type-only and
    NotImplemented bodies."""
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in {
        "__repr__",
        "__str__",
        "__rich_repr__",
    }


def _type_checking_if(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in {
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    }


def _deletable(stmt: ast.stmt, body: list[ast.stmt], function: str) -> bool:
    """A statement whose absence is a realistic slip: a missing ``raise``, a missing call,
    a missing state update (``self.x = …``, ``d[k] = …``, ``n += 1``).  Plain local
    bindings and ``__init__`` assignments are left alone: deleting them only raises
    ``NameError``/``AttributeError``, which says nothing about the tests."""
    if _is_docstring(stmt, body):
        return False
    if isinstance(stmt, ast.Raise):
        return not (stmt.exc is not None and "NotImplementedError" in ast.unparse(stmt.exc))
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Call)
    if function.endswith("__init__"):
        return False
    if isinstance(stmt, ast.AugAssign):
        return True
    targets = (
        stmt.targets
        if isinstance(stmt, ast.Assign)
        else [stmt.target]
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None
        else []
    )
    return any(isinstance(t, ast.Attribute | ast.Subscript) for t in targets)


class _Walker:
    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        self.sites: list[Site] = []
        self.counts: dict[tuple[str, str], int] = {}
        self.scope: list[str] = []

    # -- bookkeeping ---------------------------------------------------------------------
    def add(self, operator: str, node: ast.AST, replacement: str) -> None:
        original = ast.get_source_segment(self.source, node)
        if original is None:
            return
        function = ".".join(self.scope) or "<module>"
        key = (function, operator)
        ordinal = self.counts.get(key, 0) + 1
        self.counts[key] = ordinal
        self.sites.append(
            Site(
                path=self.path,
                function=function,
                operator=operator,
                ordinal=ordinal,
                line=node.lineno,  # type: ignore[attr-defined]
                end_line=node.end_lineno,  # type: ignore[attr-defined]
                col=node.col_offset,  # type: ignore[attr-defined]
                end_col=node.end_col_offset,  # type: ignore[attr-defined]
                original=original,
                replacement=replacement,
            )
        )

    def expr(self, operator: str, node: ast.expr, mutated: ast.expr) -> None:
        self.add(operator, node, f"({ast.unparse(mutated)})")

    # -- the walk ------------------------------------------------------------------------
    def walk(self, node: ast.AST) -> None:
        if _skipped_function(node) or _type_checking_if(node):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            # decorators, defaults and annotations are declarations, not behaviour
            self.scope.append(node.name)
            self.body(node.body)
            self.scope.pop()
            return
        self.visit_node(node)
        for field, value in ast.iter_fields(node):
            if field in {"annotation", "returns", "type_comment"}:
                continue
            if isinstance(value, list):
                if value and isinstance(value[0], ast.stmt):
                    self.body(value)
                else:
                    for item in value:
                        if isinstance(item, ast.AST):
                            self.walk(item)
            elif isinstance(value, ast.AST):
                self.walk(value)

    def body(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if not self.scope and isinstance(stmt, ast.Assign | ast.AnnAssign):
                continue  # module constants (tables, names, __all__) are declarations
            if _deletable(stmt, body, ".".join(self.scope)):
                name = "delete-raise" if isinstance(stmt, ast.Raise) else "delete-statement"
                self.add(name, stmt, "pass")
            if not _is_docstring(stmt, body):
                self.walk(stmt)

    def visit_node(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                swap = COMPARE_SWAPS.get(type(op))
                if swap is not None:
                    mutated = copy.deepcopy(node)
                    mutated.ops[i] = swap()
                    self.expr("compare", node, mutated)
        elif isinstance(node, ast.BoolOp):
            mutated_bool = copy.deepcopy(node)
            mutated_bool.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self.expr("and-or", node, mutated_bool)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.expr("drop-not", node, node.operand)
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITH_SWAPS:
            mutated_bin = copy.deepcopy(node)
            mutated_bin.op = ARITH_SWAPS[type(node.op)]()
            self.expr("arith", node, mutated_bin)
        elif isinstance(node, ast.AugAssign) and type(node.op) in ARITH_SWAPS:
            mutated_aug = copy.deepcopy(node)
            mutated_aug.op = ARITH_SWAPS[type(node.op)]()
            self.add("arith", node, ast.unparse(mutated_aug))
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                self.expr("flip-bool", node, ast.Constant(not value))
            elif isinstance(value, int) and not isinstance(value, bool):
                self.expr("constant", node, ast.Constant(value + 1))
        if isinstance(node, ast.If | ast.While | ast.IfExp) and not isinstance(
            node.test, ast.Compare | ast.UnaryOp | ast.BoolOp
        ):
            self.expr("negate-condition", node.test, ast.UnaryOp(ast.Not(), node.test))


def sites(path: str, source: str) -> list[Site]:
    """Every mutation site of one module, in a deterministic order."""
    tree = ast.parse(source)
    walker = _Walker(path, source)
    walker.body(tree.body)
    return walker.sites


def apply(source: str, site: Site) -> str:
    """The module's source with ``site`` mutated (every other character unchanged)."""
    lines = source.splitlines(keepends=True)
    # ast offsets are in UTF-8 bytes; work on bytes of the affected lines
    head = "".join(lines[: site.line - 1])
    first = lines[site.line - 1].encode()
    last = lines[site.end_line - 1].encode()
    tail = "".join(lines[site.end_line :])
    prefix = first[: site.col].decode()
    suffix = last[site.end_col :].decode()
    return head + prefix + site.replacement + suffix + tail


def all_sites(paths: list[tuple[str, str]]) -> Iterator[Site]:
    for path, source in paths:
        yield from sites(path, source)
