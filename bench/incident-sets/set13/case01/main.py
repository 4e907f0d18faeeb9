import torch

from detector import OrientedDetector
from prune_tools import make_pruning_copy, trace_layers


def main():
    model = OrientedDetector(num_classes=15)
    for p in model.parameters():
        p.requires_grad = True
    example = torch.randn(1, 3, 64, 64)
    shapes = trace_layers(model, example)
    print("traced", len(shapes), "layer types")
    pruned = make_pruning_copy(model)
    print("pruning copy ready:", sum(p.numel() for p in pruned.parameters()))


if __name__ == "__main__":
    main()
