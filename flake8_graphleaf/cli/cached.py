"""Findings as JSON-able data, for the per-file findings cache (kind="findings")."""

from __future__ import annotations

from ..analysis.findings import Edit, Finding, Fix


def finding_to_json(f: Finding) -> dict:
    return {
        "code": f.code, "line": f.line, "col": f.col, "message": f.message,
        "end_line": f.end_line, "end_col": f.end_col,
        "class_name": f.class_name, "attribute": f.attribute,
        "fix": None if f.fix is None else {
            "applicability": f.fix.applicability,
            "description": f.fix.description,
            "edits": [[e.line, e.col, e.end_line, e.end_col, e.content] for e in f.fix.edits],
        },
    }


def finding_from_json(d: dict) -> Finding:
    fix = d.get("fix")
    return Finding(
        code=d["code"], line=d["line"], col=d["col"], message=d["message"],
        end_line=d.get("end_line"), end_col=d.get("end_col"),
        class_name=d.get("class_name"), attribute=d.get("attribute"),
        fix=None if fix is None else Fix(fix["applicability"], fix["description"],
                                         tuple(Edit(*e) for e in fix["edits"])),
    )
