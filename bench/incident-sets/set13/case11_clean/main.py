import torch
import torch.multiprocessing as mp

from streaming import FrameEncoder, backward_worker

N_FRAMES = 4


def main():
    torch.manual_seed(0)
    ctx = mp.get_context("spawn")
    stream = ctx.SimpleQueue()
    learner = ctx.Process(target=backward_worker, args=(stream, N_FRAMES), daemon=True)
    learner.start()
    model = FrameEncoder()
    for step in range(N_FRAMES):
        frame = torch.randn(16, 64)
        with torch.no_grad():
            output_buffer = model(frame)
        print("frame", step, "argmax", output_buffer.argmax(-1)[:4].tolist())
        stream.put((step, frame))
    learner.join(timeout=60)
    print("stream done, learner exit code", learner.exitcode)


if __name__ == "__main__":
    main()
