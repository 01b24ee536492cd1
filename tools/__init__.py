"""Development tools that are not part of the installed package (import-linter contracts)."""
