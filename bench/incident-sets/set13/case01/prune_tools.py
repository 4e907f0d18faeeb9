import copy

import torch


class ActivationRecorder:
    def __init__(self):
        self.shapes = {}

    def __call__(self, module, inputs, output):
        if isinstance(output, torch.Tensor):
            self.shapes[module.__class__.__name__] = tuple(output.shape)


def trace_layers(model, example_inputs):
    recorder = ActivationRecorder()
    handles = [m.register_forward_hook(recorder) for m in model.modules()]
    model.eval()
    model(example_inputs)  # BREAKS
    for handle in handles:
        handle.remove()
    return recorder.shapes


def make_pruning_copy(model):
    candidate = copy.deepcopy(model)
    for p in candidate.parameters():
        p.requires_grad_(True)
    return candidate
