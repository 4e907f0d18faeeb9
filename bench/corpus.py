"""Re-scan the packages behind the human verdicts in docs/precision-verdicts/ with any checkout,
and record, for each verdict, what the checkout's finding at that place says now (reported or
not, its confidence level and the kinds of the steps its witness takes on trust).

A maintainer tool (stdlib only, not run by the tests):

    python bench/corpus.py plan                      # each set's packages and versions, nothing fetched
    python bench/corpus.py fetch                     # pip download + unpack, one site-packages per set
    python bench/corpus.py scan --linter CHECKOUT    # scans/<commit>/<set>.json (--confidence low, else
                                                     # --argument-stores on checkouts without it)
    python bench/corpus.py record --scans /work/corpus/scans/<commit> --out steps.tsv

Every subcommand takes --root (default /work/corpus; third-party code stays there, out of the
repository), --sets a,b and --python (the interpreter running pip and the linter).

A "set" is a verdict file's stem, with ``_glf010`` / ``_after`` / ``_misses`` files folded into
their round (holdout3_glf010 -> holdout3). A set's packages are the top-level folders its verdict
keys name; their versions come from the file's header comment (``# ...: name 1.2.3, ...``; a
``_glf010`` file shares its round's header) or, for files without one, from docs/precision.md
(``name 1.2.3`` as the corpus tables and the rounds' paragraphs write them) and the verdict
texts. Wheels are preferred (sdists where the header says "(sdist)" or no wheel exists; an sdist's
folder is the one under which the verdicts' paths exist); a wheel over 300 MiB is skipped; torch is
never downloaded (copied from --python's site-packages when its version is the one named). Each set is unpacked as ``<root>/sets/<set>/lib/python3.11/site-packages/<top-level>``: the
linter treats each top-level package under a site-packages folder as its own project.

``record`` writes ``set key code verdict reported confidence trust``: key ``path:line:col`` as the
verdict writes it (``path:line`` for a known miss, verdict MISS), reported yes/no (``-`` when the
set's package could not be fetched or scanned), the finding's ``confidence`` and the sorted kinds
of its ``trust`` list (``-`` when absent). A verdict matches a finding at the same path and line,
at its column read 1-based or 0-based (JSON columns are 1-based), with the same code; an old GLF010
verdict (the opt-in code being folded into the real codes) matches whatever the code; a miss
matches any finding in the statement that holds its line.
"""

from __future__ import annotations

import argparse
import ast
import collections
import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ROOT = "/work/corpus"
DEFAULT_PYTHON = "/work/main/.venv/bin/python"
SITE = os.path.join("lib", "python3.11", "site-packages")
MAX_WHEEL_BYTES = 300 * 1024 * 1024

# Import name -> distribution, where normalising the names does not find it.
ALIASES = {
    "avalanche": "avalanche-lib",
    "backpack": "backpack-for-pytorch",
    "blitz": "blitz-bayesian-pytorch",
    "dac": "descript-audio-codec",
    "df": "deepfilternet",
    "dig": "dive-into-graphs",
    "laplace": "laplace-torch",
    "lucent": "torch-lucent",
    "mace": "mace-torch",
    "onmt": "OpenNMT-py",
    "optimum": "optimum-quanto",
    "pina": "pina-mathlab",
    "pl_bolts": "lightning-bolts",
    "pyannote": "pyannote.audio",
    "pyro": "pyro-ppl",
    "pytorch_grad_cam": "grad-cam",
    "replay": "replay-rec",
    "torchcrf": "pytorch-crf",
    "tsl": "torch-spatiotemporal",
}
# distribution -> version, for a package the docs name without one (none needed today).
PINS: dict[str, str] = {}
# Held-out rounds frozen before any finding of theirs is judged: set -> [(distribution, version,
# import folders scanned)]. Such a set is fetched and scanned with these packages even before its
# verdict file exists; once it does, the versions here win over its header. The freeze (time,
# fields, each archive's sha256) is written down in docs/precision-verdicts/<set>.frozen.
FROZEN_SETS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "holdout12": [
        ("e2cnn", "0.2.3", ("e2cnn",)),
        ("julius", "0.2.8", ("julius",)),
        ("kymatio", "0.3.0", ("kymatio",)),
        ("mambapy", "1.2.0", ("mambapy",)),
        ("perceiver-pytorch", "0.11.0", ("perceiver_pytorch",)),
        ("pypose", "0.9.5", ("pypose",)),
        ("pytorch-crf", "0.7.2", ("torchcrf",)),
        ("pytorch-tcn", "1.2.3", ("pytorch_tcn",)),
        ("reformer-pytorch", "1.4.4", ("reformer_pytorch",)),
        ("tab-transformer-pytorch", "0.6.1", ("tab_transformer_pytorch",)),
        ("thop", "0.1.1.post2209072238", ("thop",)),
        ("torch-optimizer", "0.3.0", ("torch_optimizer",)),
        ("torchcfm", "1.0.7", ("torchcfm",)),
        ("torchinfo", "1.8.0", ("torchinfo",)),
        ("torchode", "1.0.1", ("torchode",)),
    ],
}
# Never downloaded: taken from the scanning python's own site-packages when the version matches.
LOCAL_ONLY = {"torch"}

SET_SUFFIX = re.compile(r"_(glf010|after|misses)$")
KEY = re.compile(r"^(?P<path>[^\s:]+?):(?P<line>\d+)(?::(?P<col>\d+))?(?::\s*(?P<code>GLF\d+))?$")
PAIR = re.compile(r"(?<![\w./-])([A-Za-z][A-Za-z0-9_.\-]*[A-Za-z0-9]) (\d+(?:\.\d+)*(?:\.post\d+)?)(?![\w.])( \(sdist\))?")
LEVELS = {"high": 3, "medium": 2, "low": 1}


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_json(path: str, default=None):
    if default is not None and not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path: str, data) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def squash(name: str) -> str:
    return re.sub(r"[-_.]+", "", name).lower()


def same_version(a: str, b: str) -> bool:
    def norm(v: str) -> str:
        head = v.partition("+")[0]
        parts = head.split(".")
        while len(parts) > 1 and parts[-1] == "0":
            parts.pop()
        return ".".join(parts)

    return norm(a) == norm(b)


# ---------------------------------------------------------------------------------------------
# verdicts


@dataclasses.dataclass
class Verdict:
    set: str
    file: str
    key: str  # path:line:col (path:line for a miss), as the verdict file writes it
    path: str
    line: int
    col: int | None
    code: str  # "-" for a miss
    verdict: str  # TRUE / FALSE / MISS


def set_of(stem: str) -> str:
    return SET_SUFFIX.sub("", stem)


def normalise_verdict(text: str) -> str | None:
    t = text.strip().upper()
    if t.startswith("TRUE"):
        return "TRUE"
    if t.startswith("FALSE") or t in ("NOTHAZARD", "NOT-HAZARD", "NOT_HAZARD"):
        return "FALSE"
    return None


def load_verdicts(vdir: str) -> tuple[list[Verdict], dict[str, list[str]], collections.Counter]:
    """Every verdict row; each file's comment lines; rows skipped (no TRUE/FALSE), by file."""
    rows: list[Verdict] = []
    comments: dict[str, list[str]] = {}
    skipped: collections.Counter = collections.Counter()
    for path in sorted(glob.glob(os.path.join(vdir, "*.tsv"))):
        stem = os.path.splitext(os.path.basename(path))[0]
        misses = stem.endswith("_misses")
        columns: list[str] | None = None
        comments[stem] = []
        for raw in read_text(path).splitlines():
            line = raw.rstrip("\n")
            if not line.strip():
                continue
            if line.startswith("#"):
                comments[stem].append(line)
                continue
            parts = line.split("\t")
            if columns is None and parts[0].strip().lower() in ("key", "store"):
                columns = [p.strip().lower() for p in parts]
                continue
            m = KEY.match(parts[0].strip())
            if not m:
                skipped[stem] += 1
                continue
            if columns is not None:
                field = dict(zip(columns, parts))
                code = m.group("code") or field.get("code", "").strip()
                verdict_text = field.get("verdict", "")
            else:
                code = m.group("code") or (parts[1].strip() if len(parts) > 1 else "")
                verdict_text = parts[2] if len(parts) > 2 and not m.group("code") else (parts[1] if len(parts) > 1 else "")
            if misses:
                verdict, code = "MISS", code or "-"
            else:
                verdict = normalise_verdict(verdict_text)
            if verdict is None or not re.fullmatch(r"GLF\d+|-", code or ""):
                skipped[stem] += 1
                continue
            key = f"{m.group('path')}:{m.group('line')}" + (f":{m.group('col')}" if m.group("col") else "")
            rows.append(Verdict(set_of(stem), stem, key, m.group("path"), int(m.group("line")),
                                int(m.group("col")) if m.group("col") else None, code, verdict))
    return rows, comments, skipped


def header_pairs(comment_lines: list[str]) -> dict[str, tuple[str, bool]]:
    """``# ... (...; linter x): name 1.2.3, other 0.4 (sdist), ...`` -> {name: (version, sdist)}."""
    out = {}
    if not comment_lines:
        return out
    first = comment_lines[0]
    tail = first.split("): ", 1)[1] if "): " in first else first.split(": ", 1)[-1]
    for name, version, sdist in PAIR.findall(tail):
        out[name] = (version, bool(sdist))
    return out


def text_pairs(texts: list[str]) -> dict[str, set[str]]:
    """``name 1.2.3`` anywhere in ``texts``: {canonical name: versions} (a version has a dot or is a
    date-like number of six digits or more, so 'round 9' or 'GLF001 15' are not versions)."""
    out: dict[str, set[str]] = collections.defaultdict(set)
    for text in texts:
        for name, version, _ in PAIR.findall(text):
            if "." in version or len(version) >= 6:
                out[canon(name)].add(version)
    return out


def pick_version(versions: set[str]) -> str | None:
    """The most specific of versions that agree (1.9 and 1.9.0); None when they disagree."""
    best = max(versions, key=lambda v: (v.count("."), len(v)))
    for v in versions:
        if not (best == v or best.startswith(v + ".")):
            return None
    return best


@dataclasses.dataclass
class Package:
    dist: str
    version: str | None
    tops: list[str]  # import folders the set's verdicts name
    sdist_only: bool = False
    problem: str = ""


def plan(vdir: str, precision_md: str) -> tuple[dict[str, list[Package]], list[Verdict], collections.Counter]:
    rows, comments, skipped = load_verdicts(vdir)
    tops_of: dict[str, dict[str, list[str]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        tops_of[r.set][r.path.split("/")[0]].append(r.path)
    headers: dict[str, dict[str, tuple[str, bool]]] = collections.defaultdict(dict)
    for stem, lines in comments.items():
        headers[set_of(stem)].update(header_pairs(lines))
    for set_name, frozen in FROZEN_SETS.items():
        for dist, version, tops in frozen:
            headers[set_name][dist] = (version, False)
            for top in tops:
                tops_of[set_name][top]  # a frozen package is scanned whether or not a verdict names it
    texts = [read_text(precision_md)] if os.path.exists(precision_md) else []
    texts += [read_text(p) for p in sorted(glob.glob(os.path.join(vdir, "*.tsv")))]
    everywhere = text_pairs(texts)
    out: dict[str, list[Package]] = {}
    for set_name in sorted(tops_of):
        by_dist: dict[str, Package] = {}
        for top in sorted(tops_of[set_name]):
            wanted = {squash(top)} | ({squash(ALIASES[top])} if top in ALIASES else set())
            header = {squash(n): (n, v, s) for n, (v, s) in headers[set_name].items()}
            hit = next((header[w] for w in wanted if w in header), None)
            if hit:
                dist, version, sdist = hit
            else:
                dist = ALIASES.get(top, top.replace("_", "-"))
                found = {canon(n): vs for n, vs in everywhere.items() if squash(n) in wanted}
                versions = set().union(*found.values()) if found else set()
                version, sdist = PINS.get(canon(dist)) or (pick_version(versions) if versions else None), False
                if found and len(found) == 1:
                    dist = next(iter(found))
            pkg = by_dist.setdefault(canon(dist), Package(dist, version, [], sdist))
            pkg.tops.append(top)
            if version is None:
                pkg.problem = "no version in the verdict header or docs/precision.md (add it to PINS)"
        out[set_name] = list(by_dist.values())
    return out, rows, skipped


# ---------------------------------------------------------------------------------------------
# fetch


def archive_name_version(filename: str) -> tuple[str, str] | None:
    base = os.path.basename(filename)
    if base.endswith(".whl"):
        parts = base[:-4].split("-")
        return (parts[0], parts[1]) if len(parts) >= 5 else None
    for ext in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if base.endswith(ext):
            stem = base[: -len(ext)]
            if "-" in stem:
                name, version = stem.rsplit("-", 1)
                return name, version
    return None


def find_download(dl: str, dist: str, version: str) -> list[str]:
    hits = []
    for f in sorted(os.listdir(dl)) if os.path.isdir(dl) else []:
        nv = archive_name_version(f)
        if nv and canon(nv[0]) == canon(dist) and same_version(nv[1], version):
            hits.append(os.path.join(dl, f))
    hits.sort(key=lambda f: not f.endswith(".whl"))  # a wheel first
    return hits


def pip_download(python: str, dl: str, dist: str, version: str, sdist_only: bool, log) -> tuple[str | None, str]:
    have = find_download(dl, dist, version)
    if have:
        return have[0], "cached"
    tries = [["--no-binary=:all:"]] if sdist_only else [["--only-binary=:all:"], ["--no-binary=:all:"]]
    why = ""
    for extra in tries:
        cmd = [python, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", dl, *extra, f"{dist}=={version}"]
        log(f"  $ {' '.join(cmd[1:])}")
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        have = find_download(dl, dist, version)
        if have:
            return have[0], "downloaded"
        why = (p.stderr.strip().splitlines() or ["pip failed"])[-1]
    return None, why


def unpack(archive: str, cache: str) -> str:
    """The archive unpacked once under cache/<file name>/ (a wheel's root is site-packages-shaped)."""
    dest = os.path.join(cache, os.path.basename(archive))
    if os.path.isdir(dest) and os.path.exists(os.path.join(dest, ".complete")):
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    if archive.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as z:
            z.extractall(dest)
    else:
        with tarfile.open(archive) as t:
            t.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(dest)
    open(os.path.join(dest, ".complete"), "w").close()
    return dest


def sdist_folder(root: str, top: str, paths: list[str]) -> str | None:
    """The folder named ``top`` in an unpacked sdist under which most verdict paths exist (the
    shallowest of equals); None when none holds any of them."""
    best = None
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if os.path.basename(dirpath) != top:
            continue
        score = sum(os.path.exists(os.path.join(os.path.dirname(dirpath), p)) for p in set(paths))
        rank = (score, -dirpath.count(os.sep))
        if score and (best is None or rank > best[0]):
            best = (rank, dirpath)
    return best[1] if best else None


def local_package(python: str, top: str) -> tuple[str | None, str | None]:
    code = (f"import importlib.util, importlib.metadata as m; s = importlib.util.find_spec({top!r}); "
            f"print(s.submodule_search_locations[0] if s else ''); print(m.version({top!r}) if s else '')")
    p = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    out = (p.stdout.splitlines() + ["", ""])[:2]
    return (out[0] or None), (out[1] or None)


def cmd_plan(args) -> int:
    sets, rows, skipped = plan(args.verdicts, args.precision)
    per_set = collections.Counter(r.set for r in rows)
    for set_name, packages in sets.items():
        print(f"{set_name} ({per_set[set_name]} rows): " + ", ".join(
            f"{p.dist}=={p.version}{' (sdist)' if p.sdist_only else ''} [{'/'.join(p.tops)}]{' !' + p.problem if p.problem else ''}"
            for p in packages))
    if skipped:
        print("rows skipped: " + ", ".join(f"{k} {n}" for k, n in sorted(skipped.items())))
    return 0


def cmd_fetch(args) -> int:
    root = args.root
    dl, cache, sets_dir = (os.path.join(root, d) for d in ("dl", "unpacked", "sets"))
    for d in (dl, cache, sets_dir):
        os.makedirs(d, exist_ok=True)
    log_path = os.path.join(root, "fetch.log")

    def log(msg: str) -> None:
        print(msg, flush=True)
        with open(log_path, "a", encoding="utf-8") as logf:
            logf.write(msg + "\n")

    log(f"== fetch {time.strftime('%Y-%m-%d %H:%M:%S')} verdicts={args.verdicts}")
    sets, rows, _ = plan(args.verdicts, args.precision)
    paths_of: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for r in rows:
        paths_of[(r.set, r.path.split("/")[0])].append(r.path)
    only = set(args.sets.split(",")) if args.sets else None
    fetched: dict[tuple[str, str], tuple[str | None, str]] = {}
    skipped_all = []
    for set_name, packages in sets.items():
        if only and set_name not in only:
            continue
        log(f"[{set_name}] " + ", ".join(f"{p.dist} {p.version} ({'/'.join(p.tops)})" for p in packages))
        site = os.path.join(sets_dir, set_name, SITE)
        shutil.rmtree(os.path.join(sets_dir, set_name, "lib"), ignore_errors=True)
        os.makedirs(site)
        lines = []
        for pkg in packages:
            if pkg.problem:
                lines.append(f"# skipped {pkg.dist}: {pkg.problem}\t{','.join(pkg.tops)}")
                skipped_all.append((set_name, pkg.dist, pkg.version, pkg.problem))
                continue
            if canon(pkg.dist) in LOCAL_ONLY:
                where, have = local_package(args.python, pkg.tops[0])
                if not where or not have or not same_version(have.split("+")[0], pkg.version):
                    why = f"not downloaded; the local one is {have or 'missing'}, the verdicts name {pkg.version}"
                    lines.append(f"# skipped {pkg.dist}=={pkg.version}: {why}\t{','.join(pkg.tops)}")
                    skipped_all.append((set_name, pkg.dist, pkg.version, why))
                    continue
                shutil.copytree(where, os.path.join(site, pkg.tops[0]), ignore=shutil.ignore_patterns("*.so", "*.so.*", "*.a", "*.pyc"))
                lines.append(f"{pkg.dist}=={pkg.version}\t{where}\tlocal\t{','.join(pkg.tops)}")
                continue
            k = (canon(pkg.dist), pkg.version)
            if k not in fetched:
                fetched[k] = pip_download(args.python, dl, pkg.dist, pkg.version, pkg.sdist_only, log)
            archive, how = fetched[k]
            if archive is None:
                lines.append(f"# skipped {pkg.dist}=={pkg.version}: {how}\t{','.join(pkg.tops)}")
                skipped_all.append((set_name, pkg.dist, pkg.version, how))
                log(f"  ! {pkg.dist}=={pkg.version}: {how}")
                continue
            size = os.path.getsize(archive)
            if archive.endswith(".whl") and size > MAX_WHEEL_BYTES:
                why = f"wheel of {size / 2**20:.0f} MiB (over {MAX_WHEEL_BYTES // 2**20} MiB)"
                os.remove(archive)
                fetched[k] = (None, why)
                lines.append(f"# skipped {pkg.dist}=={pkg.version}: {why}\t{','.join(pkg.tops)}")
                skipped_all.append((set_name, pkg.dist, pkg.version, why))
                continue
            tree = unpack(archive, cache)
            kind = "wheel" if archive.endswith(".whl") else "sdist"
            copied = []
            if kind == "wheel":
                for entry in sorted(os.listdir(tree)):
                    if entry == ".complete" or entry.endswith(".data"):
                        continue
                    src, dst = os.path.join(tree, entry), os.path.join(site, entry)
                    if os.path.exists(dst):
                        continue
                    (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, dst)
                    copied.append(entry)
                missing = [t for t in pkg.tops if not os.path.isdir(os.path.join(site, t))]
            else:
                missing = []
                for top in pkg.tops:
                    folder = sdist_folder(tree, top, paths_of[(set_name, top)])
                    if folder is None:
                        missing.append(top)
                        continue
                    shutil.copytree(folder, os.path.join(site, top), dirs_exist_ok=True)
                    copied.append(os.path.relpath(folder, tree))
            lines.append(f"{pkg.dist}=={pkg.version}\t{os.path.basename(archive)}\t{kind}\t{','.join(pkg.tops)}"
                         + (f"\tmissing: {','.join(missing)}" if missing else ""))
            log(f"  {pkg.dist}=={pkg.version}: {kind} {os.path.basename(archive)} ({how}); copied {', '.join(copied)}"
                + (f"; MISSING {missing}" if missing else ""))
        with open(os.path.join(sets_dir, set_name, "PACKAGES.txt"), "w", encoding="utf-8") as f:
            f.write(f"# set {set_name}: distribution==version, archive, kind, import folders the verdicts name\n")
            f.write("\n".join(lines) + "\n")
    if skipped_all:
        log("skipped:")
        for s in skipped_all:
            log(f"  {s[0]}: {s[1]}=={s[2]}: {s[3]}")
    return 0


# ---------------------------------------------------------------------------------------------
# scan


def checkout_commit(checkout: str) -> str:
    return subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def cmd_scan(args) -> int:
    checkout = os.path.abspath(args.linter)
    commit = checkout_commit(checkout)
    out_dir = os.path.join(args.root, "scans", commit)
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=checkout)
    env.pop("GRAPHLEAF_CACHE_DIR", None)
    helptext = subprocess.run([args.python, "-m", "flake8_graphleaf", "check", "--help"], capture_output=True, text=True,
                              env=env, cwd=checkout, check=False).stdout
    extra = ["--confidence", "low"] if "--confidence" in helptext else ["--argument-stores"]
    if "--jobs" in helptext:
        extra += ["-j", str(args.jobs)]
    if "--quiet" in helptext:
        extra += ["-q"]
    sets, _, _ = plan(args.verdicts, args.precision)
    only = set(args.sets.split(",")) if args.sets else None
    meta_path = os.path.join(out_dir, "meta.json")
    meta = read_json(meta_path, {})
    meta.update(commit=commit, checkout=checkout, flags=extra)
    meta.setdefault("sets", {})
    status = 0
    for set_name, packages in sets.items():
        if only and set_name not in only:
            continue
        site = os.path.join(args.root, "sets", set_name, SITE)
        tops = sorted({t for p in packages for t in p.tops if os.path.isdir(os.path.join(site, t))})
        if not tops:
            print(f"[{set_name}] nothing to scan (not fetched?)", flush=True)
            meta["sets"][set_name] = {"rc": None, "tops": []}
            continue
        target = os.path.join(out_dir, f"{set_name}.json")
        cmd = [args.python, "-m", "flake8_graphleaf", "check", "--no-cache", "--output-format", "json", *extra,
               *[os.path.join(site, t) for t in tops]]
        if args.nice:
            cmd = ["nice", "-n", str(args.nice), *cmd]
        t0 = time.time()
        with open(target + ".tmp", "w", encoding="utf-8") as out, open(os.path.join(out_dir, f"{set_name}.log"), "w") as err:
            rc = subprocess.run(cmd, stdout=out, stderr=err, env=env, cwd=site, check=False).returncode
        took = time.time() - t0
        n = None
        if rc in (0, 1):
            try:
                n = len(read_json(target + ".tmp"))
                os.replace(target + ".tmp", target)
            except ValueError:
                rc = -1
        if n is None:
            status = 1
        print(f"[{set_name}] rc={rc} findings={n} {took:.0f}s ({' '.join(tops)})", flush=True)
        meta["sets"][set_name] = {"rc": rc, "findings": n, "seconds": round(took, 1), "tops": tops}
        write_json(meta_path, meta)
    print(f"scans in {out_dir}")
    return status


# ---------------------------------------------------------------------------------------------
# record


def relpath_of(filename: str) -> str:
    marker = "site-packages" + os.sep
    i = filename.rfind(marker)
    return filename[i + len(marker):] if i >= 0 else filename


def field(finding: dict, name: str):
    if name in finding:
        return finding[name]
    witness = finding.get("witness")
    return witness.get(name) if isinstance(witness, dict) else None


def trust_kinds(finding: dict) -> list[str]:
    items = field(finding, "trust") or []
    return sorted({t["kind"] if isinstance(t, dict) else str(t) for t in items})


def statement_lines(source_file: str, line: int) -> range:
    """The lines of the innermost simple statement holding ``line`` (a store written over several
    lines: ``(\n self.a,\n self.b,\n) = f()``); just ``line`` when the file does not parse."""
    try:
        tree = ast.parse(read_text(source_file))
    except (OSError, SyntaxError, ValueError):
        return range(line, line + 1)
    best = None
    for node in ast.walk(tree):
        inside = isinstance(node, ast.stmt) and not hasattr(node, "body") and node.lineno <= line <= (node.end_lineno or node.lineno)
        if inside and (best is None or (node.end_lineno - node.lineno) < (best.end_lineno - best.lineno)):
            best = node
    return range(best.lineno, best.end_lineno + 1) if best else range(line, line + 1)


def match(v: Verdict, at_line: list[dict]) -> tuple[dict | None, str]:
    """The finding a verdict stands for, and how it matched ('' when none)."""
    cands = []
    for f in at_line:
        col = f["location"]["column"]
        if v.verdict == "MISS":
            how, rank = ("line", 0) if f["location"]["row"] == v.line else ("stmt", 1)
        elif v.col == col:
            how, rank = "col", 0
        elif v.col is not None and v.col + 1 == col:
            how, rank = "col0", 1
        else:
            continue
        if v.code not in ("-", "GLF010") and f["code"] != v.code:
            continue
        code_rank = 0 if f["code"] == v.code else 1
        conf = LEVELS.get(str(field(f, "confidence")), 0)
        cands.append(((code_rank, rank, -conf), how, f))
    if not cands:
        return None, ""
    cands.sort(key=lambda c: c[0])
    return cands[0][2], cands[0][1]


def cmd_record(args) -> int:
    sets, rows, skipped = plan(args.verdicts, args.precision)
    if args.sets:
        rows = [r for r in rows if r.set in set(args.sets.split(","))]
    meta_path = os.path.join(args.scans, "meta.json")
    meta = read_json(meta_path, {})
    index: dict[str, dict[tuple[str, int], list[dict]] | None] = {}
    for set_name in sets:
        p = os.path.join(args.scans, f"{set_name}.json")
        if not os.path.exists(p):
            index[set_name] = None
            continue
        by_line: dict[tuple[str, int], list[dict]] = collections.defaultdict(list)
        for f in read_json(p):
            by_line[(relpath_of(f["filename"]), f["location"]["row"])].append(f)
        index[set_name] = by_line
    fetched_tops: dict[str, set[str]] = {}
    for set_name in sets:
        site = os.path.join(args.root, "sets", set_name, SITE)
        scanned = (meta.get("sets", {}).get(set_name) or {}).get("tops")
        fetched_tops[set_name] = set(scanned) if scanned is not None else {
            t for p in sets[set_name] for t in p.tops if os.path.isdir(os.path.join(site, t))}
    out_rows = []
    hows: collections.Counter = collections.Counter()
    for v in rows:
        by_line = index.get(v.set)
        top = v.path.split("/")[0]
        if by_line is None or top not in fetched_tops.get(v.set, set()):
            out_rows.append((v, "-", "-", "-"))
            continue
        at_line = by_line.get((v.path, v.line), [])
        if v.verdict == "MISS":  # a known miss names a line: any finding in its statement
            lines = statement_lines(os.path.join(args.root, "sets", v.set, SITE, v.path), v.line)
            at_line = [f for ln in lines for f in by_line.get((v.path, ln), [])]
        f, how = match(v, at_line)
        if f is None and v.code not in ("-", "GLF010"):
            other = match(dataclasses.replace(v, code="GLF010"), at_line)[0]
            how = "glf010-only" if other is not None and other["code"] == "GLF010" else ""
        hows[(v.set, how or "none")] += 1
        if f is None:
            out_rows.append((v, "no", "-", "-"))
        else:
            conf = field(f, "confidence")
            out_rows.append((v, "yes", str(conf) if conf else "-", ",".join(trust_kinds(f)) or "-"))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("set\tkey\tcode\tverdict\treported\tconfidence\ttrust\n")
        for v, reported, conf, trust in out_rows:
            out.write(f"{v.set}\t{v.key}\t{v.code}\t{v.verdict}\t{reported}\t{conf}\t{trust}\n")
    summarise(out_rows, hows, skipped, meta, args.out)
    return 0


def table(title: str, counts: dict[str, collections.Counter]) -> None:
    print(f"\n{title}\n| {'':<28} | TRUE | FALSE | MISS | precision |\n|---|---|---|---|---|")
    for name in sorted(counts):
        c = counts[name]
        judged = c["TRUE"] + c["FALSE"]
        prec = f"{100 * c['TRUE'] / judged:.0f}%" if judged else "-"
        print(f"| {name:<28} | {c['TRUE']:>4} | {c['FALSE']:>5} | {c['MISS']:>4} | {prec:>9} |")


def summarise(out_rows, hows, skipped, meta, out_path) -> None:
    per_set: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_trust: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_conf: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_combo: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for v, reported, conf, trust in out_rows:
        c = per_set[v.set]
        c["rows"] += 1
        c[v.verdict] += 1
        c[f"rep-{reported}"] += 1
        if reported == "yes":
            c[f"rep-{v.verdict}"] += 1
            for kind in (trust.split(",") if trust != "-" else ["(no trust step)"]):
                per_trust[kind][v.verdict] += 1
            per_conf[conf][v.verdict] += 1
            per_combo[trust][v.verdict] += 1
    print(f"wrote {out_path} ({len(out_rows)} rows); scans of {meta.get('commit', '?')}")
    if skipped:
        print("verdict rows skipped (no TRUE/FALSE verdict): " + ", ".join(f"{k} {n}" for k, n in sorted(skipped.items())))
    print("\n| set | rows | TRUE | FALSE | MISS | reported | TRUE rep. | FALSE rep. | MISS rep. | not scanned | col 0-based | only as GLF010 |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")
    tot: collections.Counter = collections.Counter()
    for s in sorted(per_set):
        c = per_set[s]
        tot.update(c)
        c0, g10 = hows.get((s, "col0"), 0), hows.get((s, "glf010-only"), 0)
        tot["col0"] += c0
        tot["g10"] += g10
        print(f"| {s} | {c['rows']} | {c['TRUE']} | {c['FALSE']} | {c['MISS']} | {c['rep-yes']} | {c['rep-TRUE']} | "
              f"{c['rep-FALSE']} | {c['rep-MISS']} | {c['rep--']} | {c0} | {g10} |")
    print(f"| all | {tot['rows']} | {tot['TRUE']} | {tot['FALSE']} | {tot['MISS']} | {tot['rep-yes']} | {tot['rep-TRUE']} | "
          f"{tot['rep-FALSE']} | {tot['rep-MISS']} | {tot['rep--']} | {tot['col0']} | {tot['g10']} |")
    print("(reported: the finding is at the verdict's place with its code; 'only as GLF010': not reported, but an\n"
          " opt-in GLF010 finding is there; col 0-based: matched with the verdict's column read 0-based)")
    table("Reported rows per trust kind (a row counts once under each kind its finding has):", per_trust)
    table("Reported rows per confidence:", per_conf)
    table("Reported rows per set of trust kinds:", per_combo)


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=DEFAULT_ROOT, help="where dl/, unpacked/, sets/ and scans/ live (default %(default)s)")
    common.add_argument("--verdicts", default=os.path.join(REPO, "docs", "precision-verdicts"))
    common.add_argument("--precision", default=os.path.join(REPO, "docs", "precision.md"),
                        help="versions for verdict files without a header")
    common.add_argument("--python", default=DEFAULT_PYTHON if os.path.exists(DEFAULT_PYTHON) else sys.executable,
                        help="the python that runs pip and the linter (needs flake8, libcst) (default %(default)s)")
    common.add_argument("--sets", help="only these sets (comma-separated)")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan", parents=[common], help="print each set's packages, versions and import folders")
    sub.add_parser("fetch", parents=[common], help="download the verdicts' package versions and unpack one site-packages per set")
    s = sub.add_parser("scan", parents=[common], help="scan each set with a checkout's CLI")
    s.add_argument("--linter", required=True, help="a checkout of flake8-graphleaf (put on PYTHONPATH)")
    s.add_argument("-j", "--jobs", type=int, default=1, help="linter processes per scan (default %(default)s)")
    s.add_argument("--nice", type=int, default=10, help="nice level of the scans, 0 for none (default %(default)s)")
    r = sub.add_parser("record", parents=[common], help="join the verdicts to a scan's findings")
    r.add_argument("--scans", required=True, help="<root>/scans/<commit>")
    r.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    return {"plan": cmd_plan, "fetch": cmd_fetch, "scan": cmd_scan, "record": cmd_record}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
