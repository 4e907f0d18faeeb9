import torch


class Detection:
    __slots__ = ("box", "score", "embedding")

    def __init__(self, box, score, embedding):
        self.box = box
        self.score = score
        self.embedding = embedding

    def __reduce_ex__(self, protocol):
        return (Detection, (self.box, self.score, self.embedding))

    def iou(self, other):
        x1 = torch.maximum(self.box[0], other[0]); y1 = torch.maximum(self.box[1], other[1])
        x2 = torch.minimum(self.box[2], other[2]); y2 = torch.minimum(self.box[3], other[3])
        inter = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
        area = lambda b: (b[2] - b[0]) * (b[3] - b[1])
        return float(inter / (area(self.box) + area(other) - inter))
