import torch

from hypothesis import Hypothesis


def beam_search(cell, head, start, width=2, steps=3):
    beams = [Hypothesis([0], 0.0, start)]
    for _ in range(steps):
        candidates = []
        for hyp in beams:
            h = cell(torch.ones(1, start.shape[-1]), hyp.state)
            logp = torch.log_softmax(head(h), dim=-1)[0]
            top = torch.topk(logp, width)
            for lp, tok in zip(top.values.tolist(), top.indices.tolist()):
                candidates.append(hyp.extend(tok, lp, h))
        beams = sorted(candidates, key=lambda c: -c.score)[:width]
    return beams
