"""The calls that copy an object or send it to another process, by torch's and Python's names:
one list for the copy rules (rules/deepcopy_calls.py), the process-boundary rule
(rules/process_boundary.py) and the copy graph (heap.py)."""

from __future__ import annotations

import ast

COPIERS = {"copy.deepcopy": "copy.deepcopy", "torch.optim.swa_utils.AveragedModel": "AveragedModel"}
COPIER_NAMES = ("AveragedModel", "ModelEma", "ModelEmaV2", "ModelEmaV3")  # timm's EMA wrappers, by name
LOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
TENSOR_DATASETS = {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
MP_ROOTS = ("torch.multiprocessing", "multiprocessing")
QUEUES = ("Queue", "SimpleQueue", "JoinableQueue")
POOLS = ("Pool",)  # multiprocessing.Pool / ctx.Pool(): every task's arguments are pickled to a worker
POOL_SENDS = ("map", "map_async", "starmap", "starmap_async", "apply", "apply_async", "imap", "imap_unordered",
              "submit")
POOL_EXECUTORS = {"concurrent.futures.ProcessPoolExecutor", "concurrent.futures.process.ProcessPoolExecutor"}
SPAWNERS = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
            "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes"}
# calls that leave a tensor with a grad_fn on the module they are given as soon as they run (legacy
# weight_norm computes the weight from weight_g / weight_v when it is applied): code -> the rule that names them
LEGACY_NOW = {"torch.nn.utils.weight_norm": "GLF101", "torch.nn.utils.weight_norm.weight_norm": "GLF101"}
# torch.nn.utils.prune: each pruner makes module.<name> = <name>_orig * mask at once (GLF103), until
# prune.remove(module, name) makes it a parameter again
PRUNE_PREFIX = "torch.nn.utils.prune."
PRUNERS = frozenset(
    """random_unstructured l1_unstructured random_structured ln_structured global_unstructured
    identity custom_from_mask""".split()
)


def is_mp(qual: str | None, names: tuple[str, ...]) -> bool:
    """Is ``qual`` one of ``names`` of ``multiprocessing`` / ``torch.multiprocessing``?"""
    return qual is not None and any(qual == f"{root}.{n}" or qual == f"{root}.context.{n}"
                                    for root in MP_ROOTS for n in names)


def keyword(node: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def with_workers(node: ast.Call) -> bool:
    """A ``DataLoader(...)`` call whose num_workers is a literal > 0, or not a literal."""
    v = keyword(node, "num_workers")
    if v is None:
        v = node.args[3] if len(node.args) > 3 and not any(isinstance(a, ast.Starred) for a in node.args[:4]) else None
    if v is None:
        return False
    if isinstance(v, ast.Constant):
        return isinstance(v.value, int) and not isinstance(v.value, bool) and v.value > 0
    return True
