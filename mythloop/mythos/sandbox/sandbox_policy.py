"""What generated scene code may touch: the tables behind `verify` and the render sandbox.

Kept in one place so the static check (verify.py) and the runtime guard
(sandbox_worker.py reads only the tool table, passed to it by render.py) agree.
"""

from __future__ import annotations

import re

__all__ = [
    "ALLOWED_IMPORT_ROOTS",
    "SCENE_HELPERS",
    "FORBIDDEN_MODULE_PATHS",
    "DANGEROUS_MODULE_NAMES",
    "FORBIDDEN_BUILTINS",
    "DANGEROUS_ATTRS",
    "MANIM_FILE_HOOKS",
    "SAFE_DUNDERS",
    "ASSET_CALLS",
    "CONFIG_PATH_KEYS",
    "TEX_COMPILERS",
    "MANIM_STAR_MODULES",
    "MANIM_STAR_OBJECTS",
    "MODULE_NAME_ROOTS",
    "LATEX_DANGER_RE",
    "DUNDER_STRING_RE",
    "DARK_COLOR_NAMES",
]

# Modules a scene may import (and their submodules, minus FORBIDDEN_MODULE_PATHS).
# The charter needs manim, numpy and the pure-computation stdlib; `colour` is the
# colour library manim's colour helpers came from. Nothing here touches files,
# processes or the network.
ALLOWED_IMPORT_ROOTS = frozenset({
    "manim", "numpy", "math", "cmath", "random", "itertools", "functools", "colour",
    "typing", "__future__", "dataclasses", "enum", "collections", "fractions",
    "decimal", "statistics", "copy", "abc", "numbers",
})

# Project modules a scene may import names from (`from M import name`, those names only):
# mythloop.scenekit, the layout-safe caption lane / safe-area fit / scene end (standard
# library and manim only; the sandboxed render imports it from the installed package).
SCENE_HELPERS: dict[str, frozenset[str]] = {
    "mythloop.scenekit": frozenset({"CaptionLane", "fit", "zoom_to_fit", "end_scene",
                                    "safe_area", "caption_lane_box", "subtitle_band_top"}),
}

# Dotted paths (prefixes) inside allowed packages that read/write files, run
# processes, load code or evaluate strings.
FORBIDDEN_MODULE_PATHS = (
    "numpy.lib", "numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "numpy.testing",
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.fromfile",
    "numpy.loadtxt", "numpy.savetxt", "numpy.genfromtxt", "numpy.memmap", "numpy.fromregex",
    "numpy.DataSource", "numpy.recfromcsv", "numpy.recfromtxt", "numpy.core",
    "manim.utils.file_ops", "manim.utils.commands", "manim.utils.module_ops",
    "manim.utils.tex_file_writing", "manim.utils.sounds", "manim.utils.ipython_magic",
    "manim.utils.docbuild", "manim.utils.testing", "manim.cli", "manim.plugins",
    "manim.scene.scene_file_writer", "manim.__main__", "manim.gui",
    "manim.utils.typst_file_writing", "manim.mobject.types.image_mobject",
    "manim.mobject.svg.svg_mobject", "typing.types", "dataclasses.types", "enum.bltns",
    "manim.console", "manim.error_console",
    "typing.get_type_hints", "typing.ForwardRef", "dataclasses.make_dataclass",
    "numpy.rec.fromfile", "numpy.ma.load", "numpy.ma.dump", "numpy.ma.mrecords",
    # manim re-exports of I/O helpers under their importers' names (found by walking
    # every attribute chain a scene can name; tests/test_sandbox_verify.py walks them too)
    "manim.scene.scene.scene_classes_from_file", "manim.scene.scene.Observer",
    "manim.scene.scene.RerunSceneHandler", "manim.mobject.text.tex_mobject.tex_to_svg_file",
    "manim.mobject.text.typst_mobject.typst_to_svg_file",
    "manim.mobject.text.code_mobject.highlight", "manim.mobject.text.code_mobject.HtmlFormatter",
    "manim.renderer.shader.SHADER_FOLDER", "manim.renderer.shader.Path",
    "manim.config.digest_file", "manim.config.digest_args", "manim.config.digest_parser",
    "manim.config.get_dir", "manim.renderer.shader", "manim.renderer.shader_wrapper",
)

# Modules a scene must never reach: not importable, and never a component of an
# attribute chain rooted at an imported module (`np.os`, `utils.file_ops.os`).
DANGEROUS_MODULE_NAMES = frozenset({
    "os", "sys", "subprocess", "shutil", "socket", "pathlib", "Path", "PurePath",
    "importlib", "ctypes", "pickle", "marshal", "builtins", "io", "tempfile", "glob",
    "inspect", "gc", "codecs", "base64", "binascii", "zlib", "threading",
    "multiprocessing", "signal", "platform", "urllib", "http", "requests", "tarfile",
    "zipfile", "sqlite3", "logging", "runpy", "code", "codeop", "pty", "fcntl", "posix",
    "resource", "ssl", "asyncio", "selectors", "mmap", "webbrowser", "pydoc", "site",
    "sysconfig", "shlex", "operator", "copyreg", "posixpath", "ntpath",
    # aliases under which manim/numpy/stdlib modules hold I/O-capable modules
    "bltns", "op", "PIL", "Image", "av", "cairo", "se", "svgelements", "ET", "xml", "nx",
    "networkx", "moderngl", "manimpango", "srt", "json", "FunctionType", "CodeType",
    "ModuleType", "MethodType", "LambdaType", "typst", "typst_compiler",
    # warnings.formatwarning("", Warning, "/etc/passwd", 1) quotes a line of any file
    # (linecache); contextlib.chdir moves the process
    "warnings", "linecache", "tokenize", "traceback", "contextlib",
    # test packages and helpers shipped inside allowed packages: they import anything
    # (numpy.random.tests.test_extending holds spec_from_file_location, subprocess, ...)
    "tests", "conftest", "testing", "testutils", "_pytesttester",
    # numpy.typing.mypy_plugin holds mypy (file writers, a build, IPC) where installed;
    # numpy.matrixlib.defmatrix holds ast
    "mypy", "mypy_plugin", "ast",
    # manim's own I/O modules by their last name, for receivers verify cannot follow
    "file_ops", "module_ops", "tex_file_writing", "typst_file_writing",
    "scene_file_writer", "ipython_magic", "plugins_flags", "commands", "sounds", "docbuild",
})

# Builtins that evaluate strings, reach globals or do I/O.
FORBIDDEN_BUILTINS = frozenset({
    "__import__", "eval", "exec", "compile", "open", "input", "breakpoint", "globals",
    "locals", "vars", "help", "copyright", "credits", "license", "__builtins__",
    "__loader__", "__spec__", "__build_class__", "__file__", "__cached__",
})

# Attribute names that reach the interpreter, the OS or the filesystem whatever
# object they hang off (frames, environ, Path methods, file writers).
DANGEROUS_ATTRS = frozenset({
    "os", "sys", "subprocess", "shutil", "socket", "pathlib", "importlib", "ctypes",
    "pickle", "marshal", "builtins", "environ", "environb", "getenv", "putenv", "unsetenv", "system", "popen", "fork",
    "forkpty", "execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp",
    "execvpe", "spawnl", "spawnle", "spawnv", "spawnve", "spawnlp", "spawnvp",
    "posix_spawn", "posix_spawnp", "modules", "_getframe", "_current_frames",
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_frame", "gi_code",
    "cr_frame", "ag_frame", "tb_frame", "tb_next", "co_code", "func_globals", "mro",
    "tofile", "dump", "write_text", "write_bytes", "read_text", "read_bytes", "unlink",
    "rmdir", "mkdir", "touch", "symlink_to", "hardlink_to", "link_to", "chmod", "lchmod",
    "iterdir", "rglob", "expanduser", "get_dir", "file_writer", "save_text", "save_html",
    "save_svg", "open_file", "open_media_file", "guarantee_existence", "add_sound",
    "_evaluate", "_module", "_os", "_sys", "_io", "_imp", "_bootstrap",
    "_bootstrap_external", "_posixsubprocess",
    # numpy I/O reached through any receiver (np.rec.fromfile, np.ma..., a method)
    "fromfile", "fromregex", "loadtxt", "savetxt", "genfromtxt", "memmap", "open_memmap",
    "recfromtxt", "recfromcsv",
    # introspection that finds live objects (the audit hook's guard) or evaluates strings
    "get_objects", "get_referrers", "get_referents", "get_type_hints", "ForwardRef",
    "get_annotations",
    # numpy's file layer however it is reached (getattr(np, "lib").npyio.DataSource(None)
    # .open(path, "wb"), a module passed as a parameter): npyio, the DataSource opener,
    # open_memmap, the test helpers that make temp files or build C extensions, f2py,
    # ctypes library loading
    "lib", "npyio", "_npyio_impl", "_format_impl", "DataSource", "_datasource",
    "open", "load", "save", "savez", "savez_compressed", "testing", "extbuild",
    "build_and_import_extension", "temppath", "tempdir", "f2py", "distutils", "ctypeslib",
    "load_library", "_core",
    # writes through objects a scene can get: a PIL image (Mobject.get_image(), the
    # camera's), Mobject.save_image, a cairo surface (camera.get_cairo_context(...)
    # .get_target()), rich's pager (a process), manim helpers that run latex/typst or load
    # scene code from a file
    "save_image", "write_to_png", "create_from_png", "pager", "tex_to_svg_file",
    "typst_to_svg_file", "compile_tex", "convert_to_svg", "scene_classes_from_file",
    "get_module", "modify_atime", "get_plugins", "list_plugins", "HtmlFormatter",
    "SHADER_FOLDER", "digest_file", "digest_args", "digest_parser", "get_image",
    "get_cairo_context", "text2svg", "MarkupUtils", "PangoUtils", "register_font",
    "fc_register_font", "file_name", "formatwarning", "showwarning", "warn_explicit",
    "getline", "getlines",
    # Path objects a scene can get (a Path's rename/replace move any file), the camera's
    # background reader, manim's segment-cache cleaners (delete videos in any folder)
    "get_file_path", "get_background_array", "init_background", "get_image_from_file",
    "clear_segment_cache", "prune_segment_cache", "VideoSegmentEncoder",
    # numpy.ma.mrecords' text-file reader, manim's shader-file reader, import machinery
    "mrecords", "fromtextfile", "get_shader_code_from_file", "find_file",
    "spec_from_file_location", "module_from_spec", "exec_module", "spec_from_loader",
    "load_module", "SourceFileLoader",
    # TexTemplate.from_file reads any file as the template (its text is then `.body`)
    "from_file", "Observer", "RerunSceneHandler",
    # the renderer's "open the current frame in the image viewer" (a process)
    "show_frame",
    # what a parsed SVG (an ElementTree, an svgelements SVG) can do with a path
    "write", "writelines", "write_xml", "parse", "iterparse",
})

# Methods manim calls with a file's path or its parsed tree: a scene's subclass that
# defines one gets that object (`def modify_xml_tree(self, tree): tree.write(path)`), or
# chooses the file manim parses (`def _text2svg(...)` returning any path).
MANIM_FILE_HOOKS = frozenset({
    "modify_xml_tree", "get_mobjects_from", "generate_mobject", "init_svg_mobject",
    "get_file_path", "_text2svg", "text2svg", "init_background", "get_background_array",
    "get_image", "save_image",
})

# Dunder attributes that only name or call ordinary protocol methods.
SAFE_DUNDERS = frozenset({
    "__init__", "__name__", "__qualname__", "__doc__", "__len__", "__iter__", "__next__",
    "__getitem__", "__setitem__", "__contains__", "__eq__", "__ne__", "__lt__", "__le__",
    "__gt__", "__ge__", "__hash__", "__repr__", "__str__", "__add__", "__sub__",
    "__mul__", "__truediv__", "__floordiv__", "__neg__", "__abs__", "__call__",
    "__enter__", "__exit__", "__bool__", "__float__", "__int__", "__radd__", "__rmul__",
    "__matmul__", "__pow__", "__mod__", "__version__",
})

# manim names that load external files or write outside the render (the charter
# forbids external assets and file I/O).
ASSET_CALLS = frozenset({
    "SVGMobject", "ImageMobject", "OpenGLImageMobject", "OpenGLSVGMobject",
    "TexTemplateFromFile", "add_sound", "open_file", "open_media_file",
    "seek_full_path_from_defaults", "get_full_raster_image_path",
    "get_full_vector_image_path", "get_full_sound_file_path", "guarantee_existence",
    "guarantee_empty_existence", "SceneFileWriter", "Typst", "MathTypst",
    "OpenGLTexturedSurface",
    # manim.utils.commands, star-imported: run processes (ffprobe, ...) or list folders
    "capture", "get_video_metadata", "get_dir_layout",
    # manim.utils.file_ops / manim.plugins, star-imported: touch a file, import plugins
    "modify_atime", "get_plugins", "list_plugins", "add_extension_if_not_present",
    "ensure_executable",
    # numpy's file opener, by any name a scene could give it
    "DataSource",
})

# manim config keys that redirect output, load files or launch viewers.
CONFIG_PATH_KEYS = frozenset({
    "media_dir", "video_dir", "images_dir", "tex_dir", "text_dir", "partial_movie_dir",
    "sections_dir", "log_dir", "output_file", "input_file", "assets_dir",
    "custom_folders", "tex_template_file", "plugins", "ffmpeg_executable", "preview",
    "show_in_file_browser", "media_embed", "config_file",
    # not settings, but the same kind of name: an image file the camera or a surface reads
    "background_image", "image_file", "dark_image_file",
})

TEX_COMPILERS = frozenset({"latex", "pdflatex", "xelatex", "lualatex"})

# Module objects that `from manim import *` puts into a scene's namespace
# (checked against the real manim by tests/test_sandbox_verify.py).
MANIM_STAR_MODULES = {
    "typing": "manim.typing", "constants": "manim.constants", "utils": "manim.utils",
    "mobject": "manim.mobject", "np": "numpy", "animation": "manim.animation",
    "data_structures": "manim.data_structures", "renderer": "manim.renderer",
    "scene": "manim.scene", "camera": "manim.camera", "manager": "manim.manager",
    "opengl": "manim.opengl", "color": "manim.utils.color",
    "rate_functions": "manim.utils.rate_functions", "unit": "manim.utils.unit",
    "core": "manim.utils.color.core", "AS2700": "manim.utils.color.AS2700",
    "BS381": "manim.utils.color.BS381", "DVIPSNAMES": "manim.utils.color.DVIPSNAMES",
    "SVGNAMES": "manim.utils.color.SVGNAMES", "X11": "manim.utils.color.X11",
    "XKCD": "manim.utils.color.XKCD", "manim_colors": "manim.utils.color.manim_colors",
    "plugins": "manim.plugins",
}

# Objects (not modules) that `from manim import *` puts into a scene's namespace and
# whose attributes are checked as module paths: the config's private parser reads any
# file, `config.digest_file(...)` too; the rich consoles open a pager process.
MANIM_STAR_OBJECTS = {
    "config": "manim.config", "console": "manim.console", "error_console": "manim.error_console",
}

# Attribute names under which allowed packages hold numpy or manim themselves
# (`mobject.geometry.arc.np`): a module path is checked again from each of them, so
# `...arc.np.lib` is `numpy.lib`.
MODULE_NAME_ROOTS = {"np": "numpy", "numpy": "numpy", "manim": "manim"}

# TeX primitives that read or write files or run code (LaTeX strings reach latex).
LATEX_DANGER_RE = re.compile(
    r"\\(input|include|includegraphics|openin|openout|write|immediate|read|readline|"
    r"directlua|latelua|special|catcode|ShellEscape|usepackage\s*\{\s*shellesc|"
    # a control sequence built from text (\csname input\endcsname), LaTeX's own readers
    r"csname|InputIfFileExists|@+input|lstinputlisting|verbatiminput|filecontents|"
    r"pdffiledump|pdfximage|openin|scantokens)(?![A-Za-z])"
)

# A string literal naming an introspection dunder (feeds getattr/format tricks).
DUNDER_STRING_RE = re.compile(
    r"__(class|bases|base|mro|subclasses|globals|builtins|import|code|closure|dict|"
    r"getattribute|getattr|setattr|delattr|loader|spec|self|func|reduce|reduce_ex|"
    r"traceback|frame|defaults|kwdefaults|wrapped|init_subclass|module|file)__"
)

DARK_COLOR_NAMES = frozenset({"BLACK", "PURE_BLACK", "black"})
