import copy


def make_checkpoint(model, stopper, epoch):
    return {
        "epoch": epoch,
        "model": copy.deepcopy(model.state_dict()),
        "stopper": copy.deepcopy(stopper),
    }
