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

from setuptools import find_packages, setup

CODE = {"mythloop_flows": "flows", "mythloop_tasks": "tasks"}
DATA = {f"mythloop._data.{folder}": folder for folder in ("agents", "fixtures", "deployments")}


def _packages() -> list[str]:
    packages = find_packages(include=["mythloop", "mythloop.*", "mythloop_app", "mythloop_app.*"])
    for name, folder in CODE.items():
        packages += [name + sub.removeprefix(folder)
                     for sub in find_packages(include=[folder, f"{folder}.*"])]
    return packages + list(DATA)  # data folders: no __init__.py, their files as package data


setup(
    packages=_packages(),
    package_dir={**CODE, **DATA},
    package_data={name: ["**/*"] for name in DATA},
    exclude_package_data={name: ["**/__pycache__/*", "**/*.pyc"] for name in DATA},
)
