"""Custom import-linter contracts, registered in pyproject.toml's `contract_types`.

`standard_library_only`: the listed modules import only the standard library and the external
packages named in `allow`, nothing else, not even the project's own modules. The files that
run inside the render sandbox (mythloop/mythos/sandbox/sandbox_init.py, sandbox_worker.py,
layout_probe.py) are run by path or as source there, where mythloop itself may not be
importable, so this is what keeps them working. lint-imports puts the working directory on
sys.path, so it finds this module when run from the repository root (`make lint`).
"""

from __future__ import annotations

import sys

from importlinter import Contract, ContractCheck, fields, output


class StandardLibraryOnlyContract(Contract):
    type_name = "standard_library_only"

    modules = fields.ListField(subfield=fields.ModuleField())
    allow = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph, verbose: bool) -> ContractCheck:
        allowed = set(sys.stdlib_module_names) | set(self.allow or ())
        breaches = []
        for module in sorted(m.name for m in self.modules):  # type: ignore[attr-defined]
            if module not in graph.modules:
                breaches.append((module, "(module not found)", []))
                continue
            for imported in sorted(graph.find_modules_directly_imported_by(module)):
                if imported.split(".")[0] in allowed:
                    continue
                details = graph.get_import_details(importer=module, imported=imported)
                breaches.append((module, imported, [d["line_number"] for d in details]))
        return ContractCheck(kept=not breaches, metadata={"breaches": breaches})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for module, imported, lines in check.metadata["breaches"]:
            where = f" (l. {', '.join(map(str, lines))})" if lines else ""
            output.print_error(f"{module} imports {imported}{where}: only the standard library"
                               f"{' and ' + ', '.join(sorted(self.allow)) if self.allow else ''}"
                               f" may be imported there", bold=False)
            output.new_line()
