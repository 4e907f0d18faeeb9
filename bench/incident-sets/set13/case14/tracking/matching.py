import torch


def best_match(job):
    detection, gallery_boxes, gallery_embeddings = job
    sims = gallery_embeddings @ detection.embedding
    ious = torch.tensor([detection.iou(b) for b in gallery_boxes])
    score = 0.7 * sims + 0.3 * ious
    return int(score.argmax()), round(float(score.max()), 4)
