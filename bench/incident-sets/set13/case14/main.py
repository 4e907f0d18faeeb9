import multiprocessing

import torch

from tracking.matching import best_match
from tracking.reid import ReIDHead, build_detections


def random_boxes(n):
    xy = torch.rand(n, 2) * 50
    return torch.cat([xy, xy + 10 + torch.rand(n, 2) * 20], dim=1)


def main():
    torch.manual_seed(0)
    reid = ReIDHead()
    detections = build_detections(reid, random_boxes(4), torch.rand(4), torch.randn(4, 24))
    gallery_boxes = random_boxes(6)
    gallery_embeddings = torch.nn.functional.normalize(torch.randn(6, 16), dim=-1)
    jobs = [(d, gallery_boxes, gallery_embeddings) for d in detections]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        matches = pool.map(best_match, jobs)
    print("matches", matches)


if __name__ == "__main__":
    main()
