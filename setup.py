"""Where mythloop's files go when it is installed (everything else is in pyproject.toml).

The repository keeps its layout: flows/, tasks/, agents/, fixtures/ and deployments/ at the
top. Installed, they sit under the project's own names only:

    flows/        -> mythloop_flows        (Prefect flows)
    tasks/        -> mythloop_tasks        (Prefect tasks)
    agents/       -> mythloop/_data/agents       (package data, read by mythloop.data)
    fixtures/     -> mythloop/_data/fixtures
    deployments/  -> mythloop/_data/deployments

An editable install (`pip install -e .`, what `make setup` does) maps the same names onto the
checkout's folders; mythloop.data then reads the data folders beside the package.
"""

from pathlib import Path

from setuptools import find_packages, setup

CODE = {"mythloop_flows": "flows", "mythloop_tasks": "tasks"}
DATA = {f"mythloop._data.{folder}": folder for folder in ("agents", "fixtures", "deployments")}


def _data_packages() -> dict[str, list[str]]:
    """Each data folder, and each subfolder whose name is an identifier (Python sees those as
    packages), with its files: its own, and those under subfolders that cannot be packages
    (fixtures/pool/real/asyncio-debugging/...)."""
    packages = {}
    for name, folder in DATA.items():
        todo = [(name, Path(folder))]
        while todo:
            package, path = todo.pop()
            patterns = ["*"]
            for sub in sorted(p for p in path.iterdir() if p.is_dir()):
                if sub.name == "__pycache__":
                    continue
                if sub.name.isidentifier():
                    todo.append((f"{package}.{sub.name}", sub))
                else:
                    patterns.append(f"{sub.name}/**/*")
            packages[package] = patterns
    return packages


def _packages() -> list[str]:
    packages = find_packages(include=["mythloop", "mythloop.*", "mythloop_app", "mythloop_app.*"])
    for name, folder in CODE.items():
        packages += [name + sub.removeprefix(folder)
                     for sub in find_packages(include=[folder, f"{folder}.*"])]
    return packages + list(DATA_PACKAGES)


DATA_PACKAGES = _data_packages()  # no __init__.py in them: namespace packages of data files

setup(
    packages=_packages(),
    package_dir={**CODE, **DATA},
    package_data=DATA_PACKAGES,
    exclude_package_data={name: ["*.pyc", "**/*.pyc"] for name in DATA_PACKAGES},
)
