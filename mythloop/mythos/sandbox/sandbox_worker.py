"""Runs manim inside the render sandbox behind a Python audit hook (defence in depth).

Executed as ``python -I -c <this source> <spec json>`` by sandbox_init.py, already
unprivileged and resource-limited. Standard library and manim only: it imports nothing
from mythloop (the package may not be readable there; an import contract in pyproject.toml
checks it). The hook refuses, with PermissionError:
writes outside the render dir, any process except the exact latex/dvisvgm
commands manim issues, sockets, ctypes, and path changes outside the render dir.
The OS layers (user, namespaces, rlimits) stay the real boundary: a hook can be
bypassed by code that corrupts interpreter memory, which is why ctypes is refused.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import socket
import sys

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_DENY_ALWAYS = frozenset({
    "os.system", "os.spawn", "os.fork", "os.forkpty", "pty.spawn", "os.startfile",
    "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "webbrowser.open",
    "pickle.find_class", "os.kill", "os.killpg", "syslog.openlog",
})
_PATH_EVENTS = frozenset({
    "os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.symlink", "os.link", "os.chmod",
    "os.chown", "os.truncate", "os.utime", "os.chflags", "os.lchflags", "os.lchmod",
    "os.lchown", "shutil.rmtree", "shutil.copyfile", "shutil.copytree", "shutil.move",
    "shutil.copymode", "shutil.copystat", "os.mkfifo", "os.mknod",
})
_TEX_FLAGS = frozenset({"-interaction=batchmode", "-halt-on-error", "-no-pdf",
                        "-output-format=dvi", "-output-format=pdf"})
_SVG_FLAGS = re.compile(r"--pdf|--page=\d+|--no-fonts|--verbosity=\d")


class _Guard:
    """The audit hook: one instance per process, `busy` stops re-entry."""

    def __init__(self, workdir: str, tools: list[str], path_env: str,
                 tex_env: dict[str, str] | None = None) -> None:
        self.workdir = os.path.realpath(workdir)
        self.tools = frozenset(tools)
        self.path_env = path_env
        self.tex_env = dict(tex_env or {})  # tex_policy.tex_env: TeX's paranoid file access
        self.busy = False

    def tex_env_problem(self, env) -> str | None:
        """An entry that unpins TeX's file access (a changed value, or an override kpathsea
        prefers: VAR.progname, VAR_progname); None when the pinned rules hold."""
        for key, value in self.tex_env.items():
            if env.get(key) != value:
                return key
        for key in env:
            if key not in self.tex_env and any(
                    key.split(".", 1)[0] == name or key.startswith(name + "_")
                    for name in self.tex_env):
                return key
        return None

    def inside(self, path, base: str | None = None) -> bool:
        """True when PATH (resolved, symlinks followed) lies in the render dir."""
        try:
            text = os.fsdecode(path)
        except TypeError:
            return False
        full = os.path.realpath(os.path.join(base or os.getcwd(), text))
        return full == self.workdir or full.startswith(self.workdir + os.sep) or full == "/dev/null"

    def deny(self, what: str) -> None:
        raise PermissionError(f"sandbox: {what} is not allowed in a scene render")

    def check_tool(self, exe, argv, cwd, env) -> None:
        """Allow only manim's own latex/dvisvgm command lines, on files in the render dir."""
        if isinstance(argv, (str, bytes)) or not argv:
            self.deny(f"running {argv!r}")
        argv = [os.fsdecode(a) for a in argv]
        name = os.path.basename(os.fsdecode(exe) if exe else argv[0])
        if name not in self.tools:
            self.deny(f"running '{name}' (only {', '.join(sorted(self.tools))} may run)")
        path = (env if env is not None else os.environ).get("PATH", "")
        if path != self.path_env:
            self.deny("running a tool with a changed PATH")
        changed = self.tex_env_problem(env if env is not None else os.environ)
        if changed:
            self.deny(f"running '{name}' with TeX's file access changed ({changed})")
        resolved = shutil.which(name, path=self.path_env)
        explicit = os.fsdecode(exe) if exe and "/" in os.fsdecode(exe) else None
        if explicit and (resolved is None or
                         os.path.realpath(explicit) != os.path.realpath(resolved)):
            self.deny(f"running '{name}' from an unexpected place")
        # not on PATH at all: let exec fail, so the render reports the missing tool
        base = os.path.join(os.getcwd(), os.fsdecode(cwd)) if cwd else os.getcwd()
        if cwd and not self.inside(cwd):
            self.deny("running a tool outside the render dir")
        for arg in argv[1:]:
            if arg in _TEX_FLAGS or _SVG_FLAGS.fullmatch(arg):
                continue
            value = arg.split("=", 1)[1] if arg.startswith(("-output-directory=", "--output=")) \
                else arg
            if value.startswith("-") or not self.inside(value, base):
                self.deny(f"'{name}' with argument {arg!r}")

    def __call__(self, event: str, args: tuple) -> None:
        if self.busy:
            return
        self.busy = True
        try:
            self.dispatch(event, args)
        finally:
            self.busy = False

    def dispatch(self, event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int) or path is None:
                return
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writing and not self.inside(path):
                self.deny(f"writing {os.fsdecode(path)!r} (outside the render dir)")
        elif event == "subprocess.Popen":
            exe, argv, cwd, env = args
            self.check_tool(exe, argv, cwd, env)
        elif event in ("os.posix_spawn", "os.exec"):
            path, argv, env = args[:3]
            self.check_tool(path, argv, None, env)
        elif event in _DENY_ALWAYS or event.startswith("ctypes."):
            self.deny(event)
        elif event == "socket.__new__" and len(args) > 1 and args[1] not in (1, -1):
            self.deny("opening a network socket")  # AF_UNIX (1) only for local pipes
        elif event in _PATH_EVENTS:
            for arg in args:
                if isinstance(arg, (str, bytes, os.PathLike)) and not self.inside(arg):
                    self.deny(f"{event} on {os.fsdecode(arg)!r} (outside the render dir)")


PROGRESS_PREFIX = "mythloop-progress: animation"


def _report_animations() -> None:
    """Print one marker line as each animation (play or wait) starts, for the parent's relay.

    The parent only echoes the number and a strictly filtered name from these lines, so a
    scene that prints look-alikes can at worst show a wrong count, never reach the terminal.
    """
    from manim.scene.scene import Scene  # noqa: PLC0415 (manim: imported in prepare())

    original = Scene.play
    count = [0]

    def play(self, *args, **kwargs):
        count[0] += 1
        names = []
        for arg in args[:3]:
            kind = type(arg).__name__
            names.append("animate" if kind == "_AnimationBuilder" else kind)
        label = ",".join(names) + (",..." if len(args) > 3 else "")
        sys.stdout.write(f"{PROGRESS_PREFIX} {count[0]} {label}\n")
        sys.stdout.flush()
        return original(self, *args, **kwargs)

    play.__doc__, play.__wrapped__ = original.__doc__, original  # type: ignore[attr-defined]
    Scene.play = play  # type: ignore[method-assign]


def prepare() -> None:
    """Import manim (trusted) before any hook: it loads ctypes (watchdog) and Cython
    modules, so the hook can refuse ctypes outright afterwards. A warm worker runs this
    once, in the process it forks each render from (sandbox_init.py, serve mode)."""
    import manim.__main__  # noqa: F401, PLC0415 (here, before the hook, never at import)

    del sys.modules["manim.__main__"]  # runpy re-runs it as __main__ without a warning


def _use_formula_cache(socket_path: str) -> None:
    """Route manim's LaTeX through the parent's formula cache (formula_cache.py).

    Connected before the hook (which refuses socket.connect); afterwards each Tex/MathTex
    sends its generated .tex text and gets back the SVG, compiled outside this process.
    Without the socket (or for a non-default template) manim compiles as usual.
    """
    from manim import config  # noqa: PLC0415 (manim: imported in prepare())
    from manim.mobject.text import tex_mobject  # noqa: PLC0415
    from manim.utils import tex_file_writing as tfw  # noqa: PLC0415

    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(socket_path)
    except OSError:
        return
    original = tfw.tex_to_svg_file
    reader = conn.makefile("rb")

    def tex_to_svg_file(expression, environment=None, tex_template=None):
        template = tex_template if tex_template is not None else config["tex_template"]
        tex_file = tfw.generate_tex_file(expression, environment, template)
        svg_file = tex_file.with_suffix(".svg")
        if svg_file.exists():
            return svg_file
        if template.tex_compiler != "latex" or template.output_format != ".dvi":
            return original(expression, environment, tex_template)
        request = {"tex": tex_file.read_text(encoding="utf-8"), "compiler": "latex",
                   "format": ".dvi"}
        conn.sendall((json.dumps(request) + "\n").encode())
        reply = json.loads(reader.readline() or b"{}")
        if "svg" in reply:
            svg_file.write_text(reply["svg"], encoding="utf-8")
            return svg_file
        log = str(reply.get("log", ""))
        if log.startswith("No such file or directory"):
            raise FileNotFoundError(log)
        if not log:
            raise ValueError(f"formula cache: {reply.get('error', 'no answer')}")
        log_file = tex_file.with_suffix(".log")
        log_file.write_text(log, encoding="utf-8")
        tfw.print_all_tex_errors(log_file, "latex", tex_file)
        raise ValueError(f"latex error converting to dvi. See log output above or the log "
                         f"file: {log_file}")

    tfw.tex_to_svg_file = tex_to_svg_file
    tex_mobject.tex_to_svg_file = tex_to_svg_file


def _install_helpers(helpers: dict[str, str]) -> None:
    """Make the project's scene helpers (trusted source from mythloop, e.g.
    `mythloop.scenekit`) importable by their names. The render's view holds no checkout
    (an editable install's package lives there), so the parent passes their source."""
    import types  # noqa: PLC0415

    for name, source in helpers.items():
        parent, _, leaf = name.rpartition(".")
        if parent and parent not in sys.modules:
            package = types.ModuleType(parent)
            package.__path__ = []
            sys.modules[parent] = package
        module = types.ModuleType(name)
        module.__file__ = f"<{name}>"
        sys.modules[name] = module
        exec(compile(source, f"{leaf}.py", "exec"), module.__dict__)  # noqa: S102
        if parent:
            setattr(sys.modules[parent], leaf, module)


def run(spec: dict) -> None:
    """Install the guard, then run `manim` with the spec's arguments in this process."""
    _install_helpers(spec.get("scene_helpers") or {})
    if spec.get("tex_socket"):
        _use_formula_cache(spec["tex_socket"])
    if spec.get("progress"):
        _report_animations()
    if spec.get("layout_probe"):  # trusted source from mythloop (layout_probe.py)
        probe: dict = {}
        exec(compile(spec["layout_probe"], "layout_probe.py", "exec"), probe)  # noqa: S102
        probe["install"](spec["layout_out"])

    sys.addaudithook(_Guard(spec["workdir"], spec["tools"], os.environ.get("PATH", ""),
                            spec.get("tex_env")))
    sys.argv = ["manim", *spec["manim_argv"]]
    runpy.run_module("manim", run_name="__main__", alter_sys=True)


def main() -> None:
    prepare()
    run(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
