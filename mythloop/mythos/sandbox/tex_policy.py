"""TeX's own file access rules for every latex and dvisvgm a sandboxed render runs.

kpathsea (the path library of latex and dvisvgm) reads these settings from the environment
before any texmf.cnf, so the render's environment pins them:

    openin_any=p    paranoid reads: no absolute path, no `..`, no dot file, except under
                    TEXMFOUTPUT; TeX's own files, found through its search path, stay readable
    openout_any=p   paranoid writes, the same rule
    shell_escape=f  no \\write18, not even the restricted list
    TEXMFOUTPUT     the render dir (the one absolute place allowed)

So `\\input{/etc/hostname}` or `\\openin` of `../../x` fails however the string was built.
kpathsea prefers `VAR.progname` and `VAR_progname` to `VAR`: the sandbox's audit hook
(sandbox_worker.py) refuses a latex or dvisvgm run whose environment lacks a pinned value or
carries such an override (scene code can change os.environ at run time).

One function for every launcher: `tex_env(render_dir)`; the render engine adds it to the
sandboxed process's environment and hands it to the worker's audit hook.
"""

from __future__ import annotations

__all__ = ["TEX_FILE_ACCESS", "tex_env"]

TEX_FILE_ACCESS = {"openin_any": "p", "openout_any": "p", "shell_escape": "f"}


def tex_env(render_dir: str) -> dict[str, str]:
    """The environment entries that confine TeX's file access to `render_dir`."""
    return {**TEX_FILE_ACCESS, "TEXMFOUTPUT": render_dir}
