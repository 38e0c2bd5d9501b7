"""What the grader reads in a notebook: its exercises, its cells' names, and what each cell needs.

Nothing here runs a notebook. The exercises are found by their MyST ``{exercise}`` directive
and the code cell below it that calls a checker (``checks.sba.sba_select(sba_select)``); the
*answer* of an exercise is what that call passes to the checker, read from the last call in
the notebook (a student may check a new cell below the stub). For the fast mode, each code
cell's bindings and free names are read with ``symtable``, so that the grader can run only
the cells an answer needs.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
import threading
from dataclasses import dataclass, field

EXERCISE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{exercise\}[ \t]*(?P<title>[^\n]*)\n(?P<options>(?::[^\n]*\n)*)",
    re.M,
)
LABEL = re.compile(r"^:label:\s*(?P<label>\S+)", re.M)
CHECKER_CALL = re.compile(r"\bchecks\.(?P<name>\w+(?:\.\w+)*)\s*\(")
CHAPTER_LABEL = re.compile(r"^\((?P<label>[\w.:-]+)\)=[ \t]*$", re.M)  # "(ch-sba)=" above the title
BUILTINS = frozenset(dir(builtins))


@dataclass
class Exercise:
    label: str
    title: str
    checker: str | None  # "sba.sba_select": the checker its code cell calls, None = written
    cell: int | None = None  # the index of its code cell in the notebook it was found in
    source: str = ""  # that cell's source
    args: list[str] = field(default_factory=list)  # the checker call's arguments, as source


def source_of(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def first_line(source: str, width: int = 60) -> str:
    """A code cell's name for a student: its first non-empty line, shortened."""
    line = next((s.strip() for s in source.splitlines() if s.strip()), "(an empty cell)")
    return line if len(line) <= width else line[: width - 1] + "…"


def chapter_label(notebook: dict) -> str | None:
    """The chapter's label, ``(ch-sba)=``, from the first markdown cells of a notebook."""
    markdown = [c for c in notebook.get("cells", [])[:5] if c.get("cell_type") == "markdown"]
    for cell in markdown:
        match = CHAPTER_LABEL.search(source_of(cell))
        if match:
            return match["label"]
    return None


# CPython 3.11's compiler is not safe to call from two threads at once (ast.parse can fail with
# "SystemError: AST constructor recursion depth mismatch"), and the gradebook grades notebooks
# in a thread pool (--jobs): every parse and symbol table of a cell goes through this lock.
_COMPILER = threading.Lock()


def _python(source: str) -> ast.Module | None:
    """The cell as Python, its IPython lines (``%magic``, ``!shell``) blanked; None if it is
    not Python."""
    lines = [
        "" if line.lstrip().startswith(("%", "!", "?")) else line for line in source.splitlines()
    ]
    try:
        with _COMPILER:
            return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def checker_args(source: str, checker: str) -> list[str] | None:
    """The arguments (as source) of the last call of ``checks.<checker>(...)`` in a cell;
    keyword arguments as ``name=value``; None if the cell has no such call."""
    tree = _python(source)
    if tree is None:
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == f"checks.{checker}":
            if found is None or (node.lineno, node.col_offset) > (found.lineno, found.col_offset):
                found = node
    if found is None:
        return None
    args = [ast.unparse(a) for a in found.args]
    return args + [f"{k.arg}={ast.unparse(k.value)}" for k in found.keywords if k.arg]


def exercises(notebook: dict) -> list[Exercise]:
    """The exercises of a notebook, in order. An exercise's code cell is the first code cell
    after its statement, and before the next statement, that calls a checker (``checks.``);
    an exercise without one (a proof, a question) has ``checker=None``."""
    found: list[Exercise] = []
    for index, cell in enumerate(notebook.get("cells", [])):
        text = source_of(cell)
        if cell.get("cell_type") == "markdown":
            for match in EXERCISE.finditer(text):
                label = LABEL.search(match["options"])
                if label:
                    found.append(Exercise(label["label"], match["title"].strip(), None))
        elif cell.get("cell_type") == "code" and found and found[-1].checker is None:
            call = CHECKER_CALL.search(text)
            if call:
                exercise = found[-1]
                exercise.checker, exercise.cell, exercise.source = call["name"], index, text
                exercise.args = checker_args(text, call["name"]) or []
    return found


def checked_exercises(notebook: dict) -> list[Exercise]:
    return [e for e in exercises(notebook) if e.checker is not None]


def _calls(notebook: dict, checker: str) -> list[int]:
    return [
        i
        for i, c in enumerate(notebook.get("cells", []))
        if c.get("cell_type") == "code"
        and any(m["name"] == checker for m in CHECKER_CALL.finditer(source_of(c)))
    ]


def locate(notebook: dict, wanted: list[Exercise]) -> list[Exercise]:
    """The wanted exercises (from the reference chapter) in a submission: the cell is the one
    with the exercise's label, else the first that calls its checker (a student may have
    deleted or moved the statement), ``None`` if absent. The answer (``args``) is read from
    the *last* cell that calls the checker, else from the reference's call."""
    own = {e.label: e for e in checked_exercises(notebook)}
    located = []
    for exercise in wanted:
        calls = _calls(notebook, exercise.checker)
        if exercise.label in own and own[exercise.label].checker == exercise.checker:
            cell = own[exercise.label].cell
        else:
            cell = calls[0] if calls else None
        source = source_of(notebook["cells"][cell]) if cell is not None else ""
        args = None
        for index in reversed(calls):
            args = checker_args(source_of(notebook["cells"][index]), exercise.checker)
            if args is not None:
                break
        located.append(
            Exercise(
                exercise.label,
                exercise.title,
                exercise.checker,
                cell,
                source,
                args if args is not None else list(exercise.args),
            )
        )
    return located


def same_code(a: str, b: str) -> bool:
    def norm(s: str) -> list[str]:
        return [line.rstrip() for line in s.strip().splitlines() if line.strip()]

    return norm(a) == norm(b)


# --- what a cell binds and needs (the fast mode) ---------------------------------------------


@dataclass
class CellNames:
    binds: set[str]  # names the cell (re)binds, or may change in place, at its top level
    defines: set[str]  # names it surely rebinds (assignment, def, import): earlier cells no longer
    # matter for them
    needs: set[str]  # names its top level reads that it does not bind itself
    imports: set[str]  # names it binds by an import (modules, whose calls change nothing here)
    late_needs: set[str] = field(default_factory=set)  # names its functions read when called


def _free_of_functions(table: symtable.SymbolTable) -> set[str]:
    names = set()
    for child in table.get_children():
        names |= {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
        names |= _free_of_functions(child)
    return names


def _changed_in_place(tree: ast.Module) -> set[str]:
    """Names a top-level statement may change without rebinding them: ``x[0] = 1``,
    ``x.attr = 1``, and calls made as statements, ``model.train()`` and ``train(model)``."""
    names = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                while isinstance(target, ast.Attribute | ast.Subscript):
                    target = target.value
                    if isinstance(target, ast.Name):
                        names.add(target.id)
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            func = call.func
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name) and isinstance(call.func, ast.Attribute):
                names.add(func.id)
            names |= {a.id for a in call.args if isinstance(a, ast.Name)}
    return names


def cell_names(source: str) -> CellNames | None:
    """What a code cell binds and needs; None if it is not Python (then it is always run)."""
    tree = _python(source)
    if tree is None:
        return None
    try:
        with _COMPILER:
            table = symtable.symtable(ast.unparse(tree), "<cell>", "exec")
    except SyntaxError:
        return None
    imports = {s.get_name() for s in table.get_symbols() if s.is_imported()}
    defines = {s.get_name() for s in table.get_symbols() if s.is_assigned()} | imports
    referenced = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    needs = referenced - defines - BUILTINS
    late = _free_of_functions(table) - BUILTINS
    changed = _changed_in_place(tree)
    return CellNames(defines | changed, defines, needs | (changed - defines), imports, late)


def names_in(expression: str) -> set[str]:
    """The free names of an expression such as a checker's argument."""
    names = cell_names(f"_ = ({expression})")
    return (names.needs if names else set()) - BUILTINS


def needed_cells(
    sources: dict[int, str], wanted: set[int], extra_needs: set[str] = frozenset()
) -> set[int]:
    """The code cells (indices into ``sources``, in notebook order) to run so that the cells
    in ``wanted`` and names in ``extra_needs`` (read after the last cell) find what they read:
    for each name, the latest earlier cell that defines it, and the cells between that change
    it in place; then what those cells need, and so on. What a function reads is read when it
    is called, after the last cell (the clean re-check calls the answers then), so those
    names are looked up from the end."""
    order = sorted(sources)
    names = {i: cell_names(sources[i]) for i in order}
    modules = set().union(*(n.imports for n in names.values() if n is not None))
    run: set[int] = set()
    todo: list[tuple[int, str]] = []

    def add(index: int) -> None:
        if index in run:
            return
        run.add(index)
        cell = names[index]
        todo.extend((index, name) for name in (cell.needs if cell else ()))
        todo.extend((end, name) for name in (cell.late_needs if cell else ()))

    end = (order[-1] + 1) if order else 0
    for index in wanted:
        add(index)
    todo.extend((end, name) for name in extra_needs)
    while todo:
        before, name = todo.pop()
        for index in reversed([i for i in order if i < before]):
            cell = names[index]
            if cell is None or name not in (cell.defines if name in modules else cell.binds):
                continue
            add(index)
            if name in cell.defines:
                break
    return run
