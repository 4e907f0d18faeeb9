from torch import nn

from heads import ConvBNAct, RotatedBoxHead


class OrientedDetector(nn.Module):
    def __init__(self, num_classes=15, width=16):
        super().__init__()
        self.stem = ConvBNAct(3, width, 3, 2)
        self.stage1 = ConvBNAct(width, width * 2, 3, 2)
        self.stage2 = ConvBNAct(width * 2, width * 2, 3, 1)
        self.head = RotatedBoxHead(width * 2, num_classes)

    def forward(self, images):
        return self.head(self.stage2(self.stage1(self.stem(images))))
