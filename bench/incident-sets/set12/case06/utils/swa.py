from torch.optim.swa_utils import AveragedModel


def start_weight_averaging(model):
    return AveragedModel(model)
