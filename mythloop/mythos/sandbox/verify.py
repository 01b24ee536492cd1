"""Static check of generated Manim scene code (the first of two sandbox layers).

An AST walk that rejects, with the line of the first problem: syntax errors,
animating the camera, imports outside the allowed set, anything that reaches
the interpreter, OS, filesystem or network, external assets, and the seed's
art-direction lint (a light-paper prompt with a black background in code).
The render sandbox (render.py) must still contain whatever slips through.
"""

from __future__ import annotations

import ast
import re
import string

from pydantic import BaseModel

from mythloop.mythos.code.safe_ast import parse
from mythloop.mythos.sandbox import sandbox_policy as P

__all__ = ["VerifyResult", "verify_scene", "requires_light_art_direction"]


class VerifyResult(BaseModel):
    """Outcome of `verify_scene`: accepted, or the first problem and its line."""

    ok: bool
    reason: str | None = None
    line: int | None = None


_REFLECTION = ("getattr", "setattr", "delattr")
# Scenes whose camera is a MovingCamera: there `self.camera.frame` is an ordinary mobject
# (the documented way to pan and zoom is `self.camera.frame.animate`).
_MOVING_CAMERA_SCENES = frozenset({"MovingCameraScene", "ZoomedScene"})
# ImageMobject takes a path or an array; only an array built in memory is allowed. These
# names can turn numpy values back into strings (np.str_("path") is a str), so a value
# passing through them is not an array any more.
_NOT_ARRAY_ATTRS = frozenset({"str_", "bytes_", "unicode_", "object_", "char", "strings",
                              "item", "tolist", "tobytes", "tostring", "decode", "format",
                              "join", "fspath", "name", "dtype"})
# Array methods and functions that return one element (a numpy str scalar is a str, so
# `np.array(["photo.png"]).astype(object).max()` would be a path again).
_SCALAR_ATTRS = frozenset({"max", "min", "amax", "amin", "nanmax", "nanmin", "take",
                           "choose", "reduce", "accumulate", "flat", "getfield", "view",
                           "dtypes", "StringDType", "void", "record"})
# What a dtype may be where an image array is built: numeric numpy types, Python's number
# types, or their names ("uint8", "<f4"); never object, str, bytes or "U4".
_NUMERIC_DTYPES = frozenset({
    "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
    "float32", "float64", "double", "single", "half", "bool", "bool_", "uint", "int_",
    "intc", "uintc", "ubyte", "byte", "short", "ushort", "longlong", "ulonglong",
    "complex64", "complex128", "int", "float", "complex"})
_NUMERIC_DTYPE_RE = re.compile(r"[<>|=]?([uif]\d|b1|c\d+|\?)")
_CAMERA_RULE = ("never animate the camera (.animate on self.camera); move it with "
                "self.move_camera(...) or self.set_camera_orientation(...)")
_LIGHT_RULE = ("prompt art-direction lint: this prompt explicitly requires an archival/"
               "off-white, non-black background; replace the default dark Mythos "
               "background with warm paper and use dark ink text/geometry")


def requires_light_art_direction(prompt: str) -> bool:
    """True when the prompt asks for off-white/archival/paper and says no black (seed rule)."""
    text = prompt.lower()
    positive = ("off-white", "archival", "paper", "warm paper")
    negative = ("no black", "not black", "never black", "non-black")
    return any(t in text for t in positive) and any(t in text for t in negative)


def _literal_getattr(node: ast.AST) -> tuple[ast.AST, str] | None:
    """(receiver, name) when NODE is `getattr(x, "name")` or `getattr(x, "name", default)`:
    the same lookup as `x.name`, so every attribute rule applies to it."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) in (2, 3) and not node.keywords
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return node.args[0], node.args[1].value
    return None


def _chain(node: ast.AST) -> tuple[ast.AST, list[str]]:
    """Split `a.b.c` (or `getattr(a, "b").c`) into its root node and names ['b', 'c']."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
            continue
        lookup = _literal_getattr(node)
        if lookup is None:
            return node, names[::-1]
        node, name = lookup
        names.append(name)


def _as_attribute(node: ast.Call, ctx: ast.expr_context) -> ast.Attribute | None:
    """`getattr/setattr/delattr(x, "name", ...)` as the attribute node `x.name` it stands
    for (load, store or delete), placed at the call, so it is checked like one."""
    if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant)
                                  and isinstance(node.args[1].value, str)):
        return None
    attr = ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ctx)
    return ast.copy_location(attr, node)


_HUGE = 10**8
_ALLOCATORS = frozenset({"bytearray", "bytes", "range", "zeros", "ones", "empty", "full",
                         "arange", "repeat", "tile", "random", "rand", "randn"})


def _exits(body: list[ast.stmt]) -> bool:
    """True when BODY can leave its loop: a break not in a nested loop, a return or raise."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Raise, ast.Break)):
            return True
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            stack.extend(n for n in node.orelse)
            stack.extend(n for n in ast.walk(node) if isinstance(n, (ast.Return, ast.Raise)))
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _const_int(node: ast.AST) -> int | None:
    """Value of a constant integer expression (10**9, 256*1024*1024), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return int(node.value) if abs(node.value) < 1e30 else 10**30
    if isinstance(node, ast.Tuple) and node.elts:  # np.zeros((100000, 100000))
        sizes = [s for s in (_const_int(e) for e in node.elts) if s is not None]
        if len(sizes) == len(node.elts):
            total = 1
            for s in sizes:
                total = min(total * max(s, 0), 10**30)
            return total
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Pow, ast.LShift)):
        left, right = _const_int(node.left), _const_int(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Mult):
            return min(left * right, 10**30)
        if isinstance(node.op, ast.LShift):
            return 10**30 if right > 100 else min(left << max(right, 0), 10**30)
        return 10**30 if right > 100 or left > 10**6 else min(left ** max(right, 0), 10**30)
    return None


def _is_dark_hex(text: str) -> bool:
    """A #rgb/#rrggbb colour with luminance under ~8% (black, #0c0c0b, ...)."""
    m = re.fullmatch(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})", text.strip())
    if not m:
        return False
    h = m.group(1)
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    r, g, b = (int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.08


class _Checker(ast.NodeVisitor):
    """Collects (line, col, reason) for every problem; the caller reports the first."""

    def __init__(self, light_prompt: bool) -> None:
        self.problems: list[tuple[int, int, str]] = []
        self.aliases: dict[str, str] = {}  # local name -> dotted module path
        self.camera_aliases: set[str] = set()
        self.frame_aliases: set[str] = set()  # names bound to a camera's frame
        self.constants: dict[str, ast.AST] = {}
        self.light_prompt = light_prompt
        self.moving_classes: set[str] = set()  # MovingCameraScene/ZoomedScene and subclasses
        self.moving = False  # inside one of them
        self.bindings: dict[str, list[ast.AST | None]] = {}  # name -> assigned values

    def flag(self, node: ast.AST, reason: str) -> None:
        self.problems.append((getattr(node, "lineno", 1), getattr(node, "col_offset", 0), reason))

    # --- imports ----------------------------------------------------------
    def _module_problem(self, path: str) -> str | None:
        parts = path.split(".")
        if parts[0] not in P.ALLOWED_IMPORT_ROOTS:
            return (f"import of '{parts[0]}' is not allowed; a scene may import only manim, "
                    "numpy, math, random, itertools, functools, colour and pure-computation "
                    "stdlib (typing, dataclasses, enum, collections, fractions, ...)")
        for prefix in P.FORBIDDEN_MODULE_PATHS:
            if path == prefix or path.startswith(prefix + "."):
                return f"'{path}' reaches files, processes or code loading; not allowed in a scene"
        for part in parts[1:]:
            if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
                return f"private module attribute '{path}' is not allowed"
            if part == "types" and not path.startswith("manim.mobject.types"):
                return f"'{path}' reaches the 'types' module (code objects); not allowed"
            if part in P.DANGEROUS_MODULE_NAMES:
                return f"'{path}' reaches the '{part}' module; not allowed in a scene"
            if part in P.DANGEROUS_ATTRS:  # `from m import name` is `m.name`
                return (f"'{path}' reaches '{part}', which does file, process or "
                        "code-loading I/O; not allowed in a scene")
        for i, part in enumerate(parts[1:], 1):  # `mobject.geometry.arc.np.lib` is numpy.lib
            if part in P.MODULE_NAME_ROOTS and i + 1 < len(parts):
                problem = self._module_problem(".".join([P.MODULE_NAME_ROOTS[part],
                                                         *parts[i + 1:]]))
                if problem:
                    return f"'{path}' is {problem}"
        return None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            problem = self._module_problem(alias.name)
            if alias.name in P.SCENE_HELPERS:
                problem = (f"import names from {alias.name} instead: from {alias.name} import "
                           + ", ".join(sorted(P.SCENE_HELPERS[alias.name])))
            if problem:
                self.flag(node, problem)
            elif alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                self.aliases[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag(node, "relative imports are not allowed in a scene")
            return
        module = node.module or ""
        if module in P.SCENE_HELPERS:  # a project helper: its listed names, nothing else
            for alias in node.names:
                if alias.name in P.SCENE_HELPERS[module]:
                    self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
                else:
                    self.flag(node, f"'{alias.name}' is not one of {module}'s scene helpers ("
                                    + ", ".join(sorted(P.SCENE_HELPERS[module])) + ")")
            return
        problem = self._module_problem(module)
        if problem:
            self.flag(node, problem)
            return
        for alias in node.names:
            if alias.name == "*":
                if module == "manim":
                    self.aliases.update(P.MANIM_STAR_MODULES)
                    self.aliases.update(P.MANIM_STAR_OBJECTS)
                continue
            full = f"{module}.{alias.name}"
            problem = self._module_problem(full)
            if alias.name == "ImageMobject" and module == "manim" and alias.asname in (
                    None, "ImageMobject"):
                pass  # each use is checked: built from an array in memory only
            elif problem is None and alias.name in P.ASSET_CALLS:
                problem = f"'{alias.name}' loads external files; the charter forbids assets"
            if problem:
                self.flag(node, problem)
            else:
                self.aliases[alias.asname or alias.name] = full

    # --- names and attributes --------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _REFLECTION:
            self.flag(node, f"'{node.id}' used as a value hides attribute lookups; call it "
                            "directly with a literal attribute name")
        elif node.id in P.FORBIDDEN_BUILTINS:
            self.flag(node, f"'{node.id}' reaches outside the scene (eval/exec/import/"
                            "file access are not allowed)")
        elif node.id.startswith("__") and node.id.endswith("__") and node.id != "__name__":
            self.flag(node, f"dunder name '{node.id}' is not allowed in a scene")
        elif node.id in P.ASSET_CALLS:
            self.flag(node, f"'{node.id}' loads external files or writes outside the render; "
                            "the charter forbids assets and file I/O")
        elif isinstance(node.ctx, ast.Load) and self.aliases.get(node.id, "").split(".")[0] \
                in P.ALLOWED_IMPORT_ROOTS:
            problem = self._module_problem(self.aliases[node.id])  # `plugins`, `console`
            if problem:
                self.flag(node, f"'{node.id}' is {problem}")

    def _camera_ref(self, node: ast.AST) -> str | None:
        """'camera' when NODE is (an alias of) the scene's camera, 'frame' for its frame."""
        root, names = _chain(node)
        if not isinstance(root, ast.Name):
            return None
        if root.id in self.frame_aliases:
            return "frame"
        if root.id in self.camera_aliases:
            rest = names
        elif root.id == "self" and names[:1] == ["camera"]:
            rest = names[1:]
        elif root.id == "self" and names[:2] == ["renderer", "camera"]:
            rest = names[2:]
        else:
            return None
        return "frame" if rest[:1] == ["frame"] else "camera"

    def _is_camera(self, node: ast.AST) -> bool:
        """True for the camera itself, and for its frame outside moving-camera scenes."""
        ref = self._camera_ref(node)
        return ref == "camera" or (ref == "frame" and not self.moving)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self.moving
        self.moving = node.name in self.moving_classes
        self.generic_visit(node)
        self.moving = outer

    # --- images built in memory -------------------------------------------
    def _is_array(self, node: ast.AST, depth: int = 0) -> bool:
        """True when NODE is surely a numpy array (or numbers) built in memory, never a
        string: a numpy call, a method of an array, arithmetic on arrays, a literal list of
        numbers, or a name every binding of which is one of these."""
        if depth > 8:
            return False
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if isinstance(node, (ast.List, ast.Tuple)):
            return bool(node.elts) and all(self._is_array(e, depth + 1) for e in node.elts)
        if isinstance(node, ast.BinOp):
            return self._is_array(node.left, depth + 1) and self._is_array(node.right, depth + 1)
        if isinstance(node, ast.UnaryOp):
            return self._is_array(node.operand, depth + 1)
        if isinstance(node, ast.Name):
            values = self.bindings.get(node.id) or []
            return bool(values) and all(v is not None and self._is_array(v, depth + 1)
                                        for v in values)
        if isinstance(node, ast.Attribute):  # np.uint8 as a dtype, arr.T
            return node.attr not in _NOT_ARRAY_ATTRS | _SCALAR_ATTRS \
                and self._is_numpy(node, depth)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr not in _NOT_ARRAY_ATTRS | _SCALAR_ATTRS \
                and self._is_numpy(node.func, depth) \
                and all(self._is_numeric_arg(a, depth) for a in node.args) \
                and all(self._is_numeric_arg(k.value, depth) for k in node.keywords)
        return False

    def _is_numeric_arg(self, node: ast.AST, depth: int) -> bool:
        """An argument of a numpy call building an image: numbers, flags, shapes, arrays
        built in memory, or a numeric dtype (never a string, object or a str dtype)."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return node.value in _NUMERIC_DTYPES or bool(
                    _NUMERIC_DTYPE_RE.fullmatch(node.value))
            return node.value is None or isinstance(node.value, (int, float, bool))
        if isinstance(node, ast.Name) and node.id in _NUMERIC_DTYPES:
            return node.id not in self.bindings
        if isinstance(node, ast.Attribute) and node.attr in _NUMERIC_DTYPES:
            return self._is_numpy(node, depth)
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self._is_numeric_arg(e, depth + 1) for e in node.elts)
        if isinstance(node, ast.UnaryOp):
            return self._is_numeric_arg(node.operand, depth + 1)
        if isinstance(node, ast.Slice):
            return all(p is None or self._is_numeric_arg(p, depth + 1)
                       for p in (node.lower, node.upper, node.step))
        return self._is_array(node, depth + 1)

    def _is_numpy(self, node: ast.Attribute, depth: int) -> bool:
        root, names = _chain(node)
        if any(n in _NOT_ARRAY_ATTRS or n.startswith("_") for n in names):
            return False
        if isinstance(root, ast.Name) and self.aliases.get(root.id, "").split(".")[0] == "numpy":
            return True
        return self._is_array(node.value, depth + 1)

    def _image_source(self, node: ast.Call) -> ast.AST | None:
        """The path-or-array argument of an ImageMobject(...) call."""
        if node.args:
            return node.args[0]
        return next((k.value for k in node.keywords if k.arg == "filename_or_array"), None)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._check_attribute(node)
        self.generic_visit(node)

    def _check_attribute(self, node: ast.Attribute) -> None:
        """The rules for `x.attr`, also applied to `getattr(x, "attr")` and setattr/delattr."""
        attr = node.attr
        dunder = attr.startswith("__") and attr.endswith("__")
        if attr == "animate" and self._is_camera(node.value):
            self.flag(node, _CAMERA_RULE)
        elif dunder and attr not in P.SAFE_DUNDERS:
            self.flag(node, f"attribute '{attr}' reaches interpreter internals; not allowed")
        elif attr.startswith("_") and not dunder and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            self.flag(node, f"private attribute '.{attr}' of another object is not allowed "
                            "(only self._name); use its public API")
        elif attr in P.DANGEROUS_ATTRS:
            self.flag(node, f"attribute '.{attr}' reaches the OS, files or interpreter; "
                            "not allowed in a scene")
        elif attr in P.ASSET_CALLS:
            self.flag(node, f"'.{attr}' loads external files or writes outside the render")
        elif attr in P.CONFIG_PATH_KEYS:
            self.flag(node, f"'.{attr}' is a manim setting or attribute that reads or "
                            "redirects files or launches programs; the render sets it")
        else:
            root, names = _chain(node)
            if isinstance(root, ast.Name) and root.id in self.aliases:
                problem = self._module_problem(".".join([self.aliases[root.id], *names]))
                if problem:
                    self.flag(node, problem)
                    return  # one report per chain
            elif (attr in P.DANGEROUS_MODULE_NAMES or attr == "types") and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                # a module held by an object verify cannot follow (a parameter, a list
                # item): `(lambda m: m.warnings)(mobject.mobject)`
                self.flag(node, f"attribute '.{attr}' reaches the '{attr}' module; not "
                                "allowed in a scene")
                return
            if attr == "tex_compiler" and isinstance(node.ctx, ast.Store):
                self.flag(node, "setting tex_compiler is not allowed (manim picks latex)")

    # --- structural pattern matching: `case C(name=x)` reads subject.name -----
    def visit_Match(self, node: ast.Match) -> None:
        for case in node.cases:
            self._check_pattern(case.pattern, node.subject)
        self.generic_visit(node)

    def _check_pattern(self, pattern: ast.pattern, subject: ast.expr) -> None:
        """Class patterns look attributes up on what they match (`match np: case
        object(save=f)` binds np.save): each keyword is checked as `subject.name`, and the
        patterns under it as matching that attribute."""
        if isinstance(pattern, ast.MatchClass):
            for name, sub in zip(pattern.kwd_attrs, pattern.kwd_patterns, strict=True):
                looked_up = ast.copy_location(
                    ast.Attribute(value=subject, attr=name, ctx=ast.Load()), sub)
                self._check_attribute(looked_up)
                self._check_pattern(sub, looked_up)
            unknown = ast.copy_location(ast.Name(id="_", ctx=ast.Load()), pattern)
            for sub in pattern.patterns:  # positional: attributes named by __match_args__
                self._check_pattern(sub, unknown)
        elif isinstance(pattern, (ast.MatchOr, ast.MatchSequence)):
            for sub in pattern.patterns:
                self._check_pattern(sub, subject if isinstance(pattern, ast.MatchOr)
                                    else ast.copy_location(ast.Name(id="_", ctx=ast.Load()),
                                                           sub))
        elif isinstance(pattern, ast.MatchAs) and pattern.pattern is not None:
            self._check_pattern(pattern.pattern, subject)
        elif isinstance(pattern, ast.MatchMapping):
            for sub in pattern.patterns:
                self._check_pattern(sub, ast.copy_location(ast.Name(id="_", ctx=ast.Load()),
                                                           sub))

    # --- loops and allocations (render would kill them; say so up front) ---
    def visit_While(self, node: ast.While) -> None:
        endless = isinstance(node.test, ast.Constant) and bool(node.test.value)
        if endless and not _exits(node.body):
            self.flag(node, "endless loop: 'while True' with no break/return; the render "
                            "would only end at its timeout")
        self.generic_visit(node)

    def _check_size(self, node: ast.Call, name: str | None) -> None:
        if name not in _ALLOCATORS:
            return
        for arg in node.args[:1]:
            size = _const_int(arg)
            if size is not None and size >= _HUGE:
                self.flag(node, f"{name}({size:,}) allocates far more than a scene needs "
                                "(memory bomb)")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Mult):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                size = _const_int(side)
                if size is not None and size >= _HUGE and isinstance(
                        other, (ast.List, ast.Tuple, ast.Constant)) and not isinstance(
                        getattr(other, "value", None), (int, float)):
                    self.flag(node, f"sequence repeated {size:,} times (memory bomb)")
        self.generic_visit(node)

    # --- calls, assignments, literals ------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else None)
        self._check_size(node, name)
        if isinstance(func, ast.Name) and func.id == "ImageMobject" and \
                func.id not in self.bindings:
            source = self._image_source(node)
            if source is not None and self._is_array(source):
                for child in (*node.args, *(k.value for k in node.keywords)):
                    self.visit(child)  # an image built from an array in memory reads no file
                return
            self.flag(node, "ImageMobject may only show an array built in memory "
                            "(ImageMobject(np.uint8(...))); loading image files is not allowed")
            return
        if name in _REFLECTION and isinstance(func, ast.Name):
            self._check_reflection(node, name)
        if isinstance(func, ast.Attribute) and func.attr in ("format", "format_map"):
            self._check_format(node, func)
        if any(k.arg is None for k in node.keywords) and name in (
                "Code", "TexTemplate", "replace", "tempconfig", "update", *P.ASSET_CALLS):
            self.flag(node, f"{name}(**...) hides which arguments it gets; pass them by name")
        if isinstance(func, ast.Attribute) and func.attr == "show" and self._is_viewer(node):
            self.flag(node, "Mobject.show() / Image.show() save the frame and start an image "
                            "viewer process; add the mobject to the scene instead")
        if name == "tempconfig" or (isinstance(func, ast.Attribute) and func.attr == "update"
                                    and self._is_config(func.value)):
            if not all(isinstance(a, ast.Dict) and None not in a.keys
                       and all(isinstance(k, ast.Constant) for k in a.keys) for a in node.args):
                self.flag(node, f"{name}(...) of manim settings needs a literal dict with "
                                "literal keys (settings that redirect files are not allowed)")
        if name == "Code" and (node.args or any(k.arg in ("file_name", "code_file")
                                                for k in node.keywords)):
            self.flag(node, "Code(...) may only take code_string=...; reading files is not allowed")
        for kw in node.keywords:
            if kw.arg in P.CONFIG_PATH_KEYS:
                self.flag(kw.value, f"manim setting '{kw.arg}' is not allowed in a scene")
            elif kw.arg == "tex_compiler" and not (
                    isinstance(kw.value, ast.Constant) and kw.value.value in P.TEX_COMPILERS):
                self.flag(kw.value, "tex_compiler must be one of latex/pdflatex/xelatex/lualatex")
            elif kw.arg == "background_color" and self._is_dark(kw.value):
                self._flag_dark(kw.value)
        if name in _REFLECTION and isinstance(func, ast.Name):
            for child in (*node.args, *(k.value for k in node.keywords)):
                self.visit(child)  # the callee itself was checked above
        else:
            self.generic_visit(node)

    def _is_config(self, node: ast.AST) -> bool:
        """True when NODE names manim's config (`config`, `manim.config`, an alias)."""
        root, names = _chain(node)
        return isinstance(root, ast.Name) and ".".join(
            [self.aliases.get(root.id, ""), *names]) in ("manim.config", "manim._config.config")

    def _is_viewer(self, node: ast.Call) -> bool:
        """A `.show(...)` that is Mobject.show(camera=None) or PIL's Image.show(title=None),
        not a caption lane's `lane.show(text, ...)`: no text, or a camera as its argument."""
        if any(k.arg in ("camera", "title") for k in node.keywords):
            return True
        if not node.args:
            return not any(k.arg == "text" for k in node.keywords)
        return self._camera_ref(node.args[0]) is not None or (
            isinstance(node.args[0], ast.Name) and node.args[0].id == "camera")

    def _check_reflection(self, node: ast.Call, name: str) -> None:
        target = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(target, ast.Constant) and isinstance(target.value, str)):
            self.flag(node, f"{name}() with a computed attribute name is not allowed "
                            "(string-built lookups can reach anything)")
            return
        attr = target.value
        if attr.startswith("_"):
            self.flag(node, f"{name}(..., '{attr}') reaches a private or interpreter-internal "
                            "attribute; not allowed")
            return
        if attr in P.DANGEROUS_ATTRS or attr in P.CONFIG_PATH_KEYS:
            self.flag(node, f"{name}(..., '{attr}') is .{attr}, which reaches the OS, files, "
                            "processes or manim's file settings; not allowed in a scene")
            return
        # the lookup it stands for, checked by every attribute rule: getattr(np, "lib") is
        # np.lib, setattr(t, "tex_compiler", v) sets t.tex_compiler
        ctx = {"getattr": ast.Load(), "setattr": ast.Store(), "delattr": ast.Del()}[name]
        as_attr = _as_attribute(node, ctx)
        if as_attr is not None:
            self._check_attribute(as_attr)
            if name == "setattr" and len(node.args) > 2:
                self._bind(as_attr, node.args[2])

    # --- string annotations, str.format ---------------------------------------
    def _check_annotation(self, annotation: ast.AST | None) -> None:
        """No string anywhere in an annotation: typing.get_type_hints (singledispatch's
        register, dataclasses, pydantic, ...) evaluates it as code."""
        if annotation is None:
            return
        for sub in ast.walk(annotation):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                self.flag(sub, "string annotations are evaluated as code at run time "
                               "(typing.get_type_hints, singledispatch); write the type itself")
                return

    def visit_arg(self, node: ast.arg) -> None:
        self._check_annotation(node.annotation)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._check_annotation(node.returns)
        if node.name in P.MANIM_FILE_HOOKS:
            self.flag(node, f"defining '{node.name}' overrides a manim hook that is handed a "
                            "file path or a parsed file; not allowed in a scene")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _check_format(self, node: ast.Call, func: ast.Attribute) -> None:
        """str.format / format_map only on a literal whose fields name no attribute or
        item (`{0.__class__}` and the like reach anything, even split across literals)."""
        receiver = func.value
        if not (isinstance(receiver, ast.Constant) and isinstance(receiver.value, str)):
            self.flag(node, f".{func.attr}() on a computed string is not allowed (format "
                            "fields can reach attributes); use an f-string")
            return
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(receiver.value) if f]
        except ValueError:
            return
        if any("." in f or "[" in f for f in fields):
            self.flag(node, "format fields that read attributes or items ({0.x}, {0[k]}) "
                            "are not allowed")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_annotation(node.annotation)
        if node.value is not None:
            self._bind(node.target, node.value)
        self.generic_visit(node)

    def _bind(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            ref = self._camera_ref(value)
            if ref == "camera":
                self.camera_aliases.add(target.id)
            elif ref == "frame":
                self.frame_aliases.add(target.id)
            self.constants[target.id] = value
            upper = target.id.upper()
            if ("BG" in upper or "BACKGROUND" in upper) and self._is_dark(value):
                self._flag_dark(value)
        elif isinstance(target, ast.Attribute) and target.attr == "background_color":
            if self._is_dark(value):
                self._flag_dark(value)
        elif isinstance(target, ast.Subscript):
            key = target.slice
            if not isinstance(key, ast.Constant) and self._is_config(target.value):
                self.flag(target, "manim settings may only be set by a literal name "
                                  "(config['name'] = ...); settings that redirect files are "
                                  "not allowed")
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if key.value in P.CONFIG_PATH_KEYS:
                    self.flag(target, f"manim setting '{key.value}' is not allowed in a scene")
                elif key.value == "background_color" and self._is_dark(value):
                    self._flag_dark(value)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if key.value in P.CONFIG_PATH_KEYS:
                    self.flag(key, f"manim setting '{key.value}' is not allowed in a scene")
                low = key.value.lower()
                if ("bg" in low or "background" in low) and self._is_dark(value):
                    self._flag_dark(value)
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return  # a bare string statement (docstring, comment) is inert text
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            if P.DUNDER_STRING_RE.search(node.value):
                self.flag(node, "string names an interpreter-internal dunder; not allowed")
            elif P.LATEX_DANGER_RE.search(node.value):
                self.flag(node, "LaTeX that reads/writes files or runs code (\\input, \\write, "
                                "\\openout, ...) is not allowed")

    def _is_dark(self, node: ast.AST, depth: int = 0) -> bool:
        if not self.light_prompt or depth > 4:
            return False
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.strip().lower() == "black" or _is_dark_hex(node.value)
        if isinstance(node, ast.Name):
            if node.id in P.DARK_COLOR_NAMES:
                return True
            value = self.constants.get(node.id)
            return value is not None and self._is_dark(value, depth + 1)
        if isinstance(node, ast.Call) and node.args:  # ManimColor("#000"), ManimColor(BLACK)
            return self._is_dark(node.args[0], depth + 1)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            mapping = self.constants.get(node.value.id)
            if isinstance(mapping, ast.Dict) and isinstance(node.slice, ast.Constant):
                for key, value in zip(mapping.keys, mapping.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == node.slice.value:
                        return self._is_dark(value, depth + 1)
        return False

    def _flag_dark(self, node: ast.AST) -> None:
        self.flag(node, _LIGHT_RULE)


def _base_names(cls: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases]


def _collect_bindings(tree: ast.AST, checker: _Checker) -> None:
    """Moving-camera scene classes, and every value each name is bound to (None for a
    binding whose value is not a plain assignment: a loop target, a parameter, an import)."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for _ in range(len(classes) + 1):
        for cls in classes:
            if any(b in _MOVING_CAMERA_SCENES or b in checker.moving_classes
                   for b in _base_names(cls)):
                checker.moving_classes.add(cls.name)
    plain: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    checker.bindings.setdefault(target.id, []).append(node.value)
                    plain.add(id(target))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and id(node) not in plain:
            checker.bindings.setdefault(node.id, []).append(None)
        elif isinstance(node, ast.arg):
            checker.bindings.setdefault(node.arg, []).append(None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            checker.bindings.setdefault(node.name, []).append(None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                manim_image = (isinstance(node, ast.ImportFrom) and node.module == "manim"
                               and alias.name == "ImageMobject"
                               and alias.asname in (None, "ImageMobject"))
                if alias.name != "*" and not manim_image:
                    name = (alias.asname or alias.name).split(".")[0]
                    checker.bindings.setdefault(name, []).append(None)


def _collect_module_aliases(tree: ast.AST, checker: _Checker) -> None:
    """Names bound to a module or an object whose attributes are module paths, wherever
    they are bound: imports, and plain assignments of such a chain (`n = np`,
    `m = getattr(np, "lib")`, `a, b = np, 1`, `(c := config)`), so `n.lib` is numpy.lib."""
    scout = _Checker(light_prompt=False)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            scout.visit(node)
    pairs: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs.extend((t, node.value) for t in node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            pairs.append((node.target, node.value))
    flat: list[tuple[str, ast.AST]] = []
    while pairs:
        target, value = pairs.pop()
        if isinstance(target, ast.Name):
            flat.append((target.id, value))
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            pairs.extend(zip(target.elts, value.elts, strict=True))
    aliases = dict(scout.aliases)
    for _ in range(4):  # aliases of aliases
        for name, value in flat:
            root, names = _chain(value)
            if isinstance(root, ast.Name) and root.id in aliases and name not in aliases:
                aliases[name] = ".".join([aliases[root.id], *names])
    for name, path in aliases.items():
        checker.aliases.setdefault(name, path)


def verify_scene(code: str, prompt: str | None = None) -> VerifyResult:
    """Statically check scene code; on rejection give the first problem and its line."""
    try:
        tree = parse(code)
    except SyntaxError as exc:
        return VerifyResult(ok=False, reason=f"syntax error: {exc.msg}", line=exc.lineno or 1)
    except (ValueError, MemoryError, RecursionError) as exc:  # null bytes, absurd nesting
        return VerifyResult(ok=False, reason=f"cannot parse: {exc}", line=1)
    checker = _Checker(light_prompt=bool(prompt) and requires_light_art_direction(prompt or ""))
    # Bindings first so `BG = ...` / `cam = self.camera` are known wherever used.
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name)]
    for _ in range(3):  # aliases of aliases: cam = self.camera; frame = cam.frame
        for node in assigns:
            target = node.targets[0]
            assert isinstance(target, ast.Name)  # (as assigns picks them)
            checker.constants.setdefault(target.id, node.value)
            ref = checker._camera_ref(node.value)
            if ref == "camera":
                checker.camera_aliases.add(target.id)
            elif ref == "frame":
                checker.frame_aliases.add(target.id)
    _collect_bindings(tree, checker)
    _collect_module_aliases(tree, checker)
    try:
        checker.visit(tree)
    except RecursionError:
        return VerifyResult(ok=False, reason="code nests too deeply to check", line=1)
    if not checker.problems:
        return VerifyResult(ok=True)
    line, _col, reason = min(checker.problems)
    return VerifyResult(ok=False, reason=reason, line=line)
