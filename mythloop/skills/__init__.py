"""Skill catalog: load and validate SKILL.md folders (Agent Skills format)."""

from mythloop.skills.catalog import (
                                    TIERS,
                                    Catalog,
                                    CatalogIssue,
                                    Skill,
                                    load_catalog,
                                    load_skill,
                                    size_warnings,
)

__all__ = ["TIERS", "Catalog", "CatalogIssue", "Skill", "load_catalog", "load_skill",
           "size_warnings"]
