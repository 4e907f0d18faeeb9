"""verify's reports: the terminal table, JUnit XML and the JSON payload."""

from __future__ import annotations

from .results import CHECKS, FAIL, INFO, PASS, SKIP, Result


def format_table(results: list[Result], header: list[str]) -> str:
    rows = [["fixture", "device", *CHECKS, "result"]]
    for r in results:
        rows.append([r.fixture, r.device, *(r.checks[c].status for c in CHECKS), r.status])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = list(header)
    for j, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    for r in results:
        lines.append(f"{r.fixture} [{r.device}]: {r.status}")
        for c in CHECKS:
            ck = r.checks[c]
            if ck.detail:
                lines.append(f"  {c:<8} {ck.status:<4} {ck.detail}")
        for a in r.applied:
            where = f"{a['file']} line" if a.get("file") else "line"
            lines.append(f"  applied  {a['code']} {where} {a['line']} ({a['applicability']}): {a['description']}")
        for s in r.skipped:
            where = f"{s['file']} line" if s.get("file") else "line"
            lines.append(f"  left     {s['code']} {where} {s['line']}: {s['reason']}")
        for d in r.differences:
            lines.append(f"  differs  {d}")
        for n in r.notes:
            lines.append(f"  note     {n}")
        if r.graph_tensors and (r.checks["deepcopy"].status == FAIL or r.checks["crash"].status in (INFO, PASS)):
            label = "graph tensors (fixed model)" if r.checks["deepcopy"].status == FAIL else "graph tensors (original)"
            lines.append(f"  {label}: " + ", ".join(r.graph_tensors))
    failed = [r for r in results if r.status == FAIL]
    lines.append("")
    lines.append(f"{len(results)} run(s): {len(results) - len(failed)} ok, {len(failed)} failed")
    return "\n".join(lines)


def write_junit(results: list[Result], path: str) -> None:
    import xml.etree.ElementTree as ET

    suite = ET.Element("testsuite", name="graphleaf-verify")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for r in results:
        for c in CHECKS:
            ck = r.checks[c]
            counts["tests"] += 1
            case = ET.SubElement(suite, "testcase", classname=f"graphleaf.verify.{r.fixture}", name=f"{r.device}.{c}")
            if ck.status == FAIL:
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=ck.detail).text = "\n".join(r.differences + r.graph_tensors)
            elif ck.status == SKIP:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=ck.detail)
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join([f"{ck.status}: {ck.detail}"] + [f"differs: {d}" for d in r.differences])
    for k, v in counts.items():
        suite.set(k, str(v))
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def payload(results: list[Result], devices: list[str], unsafe: bool) -> dict:
    """The JSON document of ``graphleaf verify --json``."""
    import torch

    return {
        "version": 1,
        "torch": torch.__version__,
        "devices": devices,
        "cuda_available": torch.cuda.is_available(),
        "unsafe_fixes": bool(unsafe),
        "ok": all(r.status != FAIL for r in results),
        "results": [r.to_json() for r in results],
    }
