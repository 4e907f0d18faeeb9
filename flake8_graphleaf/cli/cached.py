"""Findings as JSON-able data, for the per-file findings cache (kind="findings").

A fix whose edits were never built (``check`` with text output) is stored without them
(``"edits": null``); reading it back needs ``rebuild``, which makes them again from the file.
"""

from __future__ import annotations

from ..analysis.findings import Edit, Finding, Fix


def finding_to_json(f: Finding) -> dict:
    return {
        "code": f.code, "line": f.line, "col": f.col, "message": f.message,
        "end_line": f.end_line, "end_col": f.end_col,
        "class_name": f.class_name, "attribute": f.attribute, "witness": f.witness,
        "trust": f.trust, "confidence": f.confidence,
        "fix": None if f.fix is None else {
            "applicability": f.fix.applicability,
            "description": f.fix.description,
            "edits": [[e.line, e.col, e.end_line, e.end_col, e.content] for e in f.fix.edits] if f.fix.built else None,
        },
    }


def finding_from_json(d: dict, rebuild=None) -> Finding:
    """``rebuild(finding)`` gives the edits of a fix stored without them (None: no edits)."""
    fix = d.get("fix")
    finding = Finding(
        code=d["code"], line=d["line"], col=d["col"], message=d["message"],
        end_line=d.get("end_line"), end_col=d.get("end_col"),
        class_name=d.get("class_name"), attribute=d.get("attribute"), witness=d.get("witness"),
        trust=list(d.get("trust") or ()), confidence=d.get("confidence", "high"),
    )
    if fix is not None:
        edits = fix["edits"]
        if edits is None:
            finding.fix = Fix(fix["applicability"], fix["description"],
                              build=(lambda: rebuild(finding)) if rebuild is not None else None)
        else:
            finding.fix = Fix(fix["applicability"], fix["description"], tuple(Edit(*e) for e in edits))
    return finding
