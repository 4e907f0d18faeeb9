import copy


class SnapshotKeeper:
    def __init__(self, keep=2):
        self.keep = keep
        self.snapshots = []

    def capture(self, run_state):
        self.snapshots.append(copy.deepcopy(run_state))
        self.snapshots = self.snapshots[-self.keep:]
        return self.snapshots[-1]
