"""Train the MNIST MLP or CNN of examples/mnist.py data-parallel across MPI processes.

    mpiexec -n 2 python examples/mnist_distributed.py --model mlp      # 5 epochs, global batch 128
    mpiexec -n 2 python examples/mnist_distributed.py --model cnn --zero   # optimizer state sharded (ZeRO-1)
    mpiexec -n 2 python examples/mnist_distributed.py --quick          # seconds: 512 images, one epoch

Every process builds the model; ``trainer.init`` gives all of them process 0's parameters (process
0 uses ``--seed``, so the run starts where ``python examples/mnist.py`` starts). Every process draws
the same shuffled global batches (the same ``--seed``) and trains on its share of each
(``--batch-size`` is the global batch); the gradients are averaged across processes in buckets,
overlapped with the backward pass, so the steps are those of one process on the whole global batch
and the accuracy is the same. Process 0 alone shows the progress bar and writes ``--out``
(``curves.png``, ``params.safetensors``, ``metrics.json``); at the end every process checks that its
parameters equal process 0's. Also runs under plain ``python`` (a one-process world).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

# One BLAS thread per process unless told otherwise: processes x BLAS threads busy-waiting on the
# same cores slow a step down many times (set OMP_NUM_THREADS to override). Before numpy loads BLAS.
if any(os.environ.get(v, "1").isdigit() and int(os.environ.get(v, "1")) > 1
       for v in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mnist  # noqa: E402  (the single-process example: model, data, optimizer, evaluation, outputs)

import funcgrad as fg  # noqa: E402
import funcgrad.distributed as dist  # noqa: E402
import funcgrad.nn as nn  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad import random  # noqa: E402

QUICK = {"limit_train": 512, "limit_test": 256, "epochs": 1, "batch_size": 64}


def make_loss(model: nn.Layer) -> Callable:
    """``loss_fn(params, x, y) -> (mean cross-entropy, {"accuracy": ...})`` over the rows it is given."""

    def loss_fn(params: Any, x: Any, y: Any) -> tuple:
        logits = model.apply(params, x)
        accuracy = fnp.mean((fnp.argmax(logits, axis=-1) == y).astype(fnp.float32))
        return nn.cross_entropy(logits, y), {"accuracy": accuracy}

    return loss_fn


def global_accuracy(predict: Callable, params: Any, x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy over all of (x, y), each process evaluating its share of the rows."""
    start, stop = dist.shard_bounds(len(x))
    correct = round(mnist.evaluate(predict, params, x[start:stop], y[start:stop]) * (stop - start))
    comm = dist._runtime.comm()
    total = comm.allreduce(correct) if comm is not None else correct
    return total / max(len(x), 1)


def check_equal_parameters(params: Any) -> str:
    """A message saying that every process holds process 0's parameters (raises if one does not)."""
    digest = hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in fg.tree_util.tree_leaves(params))).hexdigest()
    comm = dist._runtime.comm()
    digests = comm.allgather(digest) if comm is not None else [digest]
    different = [i for i, d in enumerate(digests) if d != digests[0]]
    if different:
        raise RuntimeError(f"the parameters of processes {different} differ from process 0's")
    return f"parameters equal on all {len(digests)} processes"


def train(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict:
    """Run the whole training; return the metrics (process 0 also writes them to ``args.out``)."""
    dist.initialize()
    rank, size = dist.process_index(), dist.process_count()
    say = log if rank == 0 else (lambda message: None)
    model, input_shape = mnist.build_model(args.model)
    (x_train, y_train), (x_test, y_test) = mnist.load_data(input_shape, args.limit_train, args.limit_test)
    epoch_batches = max(len(x_train) // args.batch_size, 1)
    opt = mnist.make_optimizer(args.optimizer, args.lr, epoch_batches * args.epochs, args.schedule)
    trainer = dist.data_parallel(make_loss(model), opt, has_aux=True, bucket_mb=args.bucket_mb,
                                 overlap=args.overlap, zero=args.zero)
    params, opt_state = trainer.init(model.init(random.key(args.seed + rank), input_shape)[0])
    predict = fg.jit(lambda params, x: fnp.argmax(model.apply(params, x), axis=-1))
    say(f"{size} process(es), global batch {args.batch_size} ({args.batch_size // size} or so per process), "
        f"{len(trainer.buckets)} gradient bucket(s) of up to {args.bucket_mb:g} MB, "
        f"{'ZeRO-1, ' if args.zero else ''}optimizer state {trainer.state_bytes(opt_state):,} bytes per process")

    rng = np.random.default_rng(args.seed)    # the same global batches on every process
    history: dict[str, Any] = {"step_loss": [], "epoch": [], "test_accuracy": [], "epoch_seconds": [],
                               "images_per_second": [], "train_accuracy": []}
    for epoch in range(1, args.epochs + 1):
        index_batches = mnist.batches(rng, len(x_train), args.batch_size)
        bar = mnist._progress_bar(index_batches, f"epoch {epoch}/{args.epochs}", args.progress and rank == 0)
        losses, accuracies = [], []
        start = time.perf_counter()
        for i, idx in enumerate(bar):
            params, opt_state, loss, aux = trainer.step(params, opt_state, x_train[idx], y_train[idx])
            losses.append(float(loss))
            accuracies.append(float(aux["accuracy"]))
            if args.progress and rank == 0 and (i % 10 == 0 or i == len(index_batches) - 1):
                bar.set_postfix(loss=f"{losses[-1]:.4f}", acc=f"{accuracies[-1]:.3f}")
        seconds = time.perf_counter() - start
        if args.progress and rank == 0:
            bar.close()
        accuracy = global_accuracy(predict, params, x_test, y_test)
        images = len(losses) * args.batch_size
        history["step_loss"].extend(losses)
        history["train_accuracy"].append(float(np.mean(accuracies)))
        history["epoch"].append(epoch)
        history["test_accuracy"].append(accuracy)
        history["epoch_seconds"].append(seconds)
        history["images_per_second"].append(images / seconds)
        say(f"epoch {epoch}/{args.epochs}: train loss {np.mean(losses):.4f}, test accuracy {accuracy:.2%} "
            f"({len(x_test)} images), {seconds:.1f} s ({images / seconds:,.0f} images/s over {size} processes)")

    say(check_equal_parameters(params))
    if rank == 0:
        history["processes"] = size
        history["zero"] = bool(args.zero)
        mnist._save_outputs(args, params, history, log)
    return history


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--epochs", type=int, default=None, help="default: 5 for mlp, 3 for cnn")
    parser.add_argument("--batch-size", type=int, default=128, help="the global batch, shared by the processes")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: as examples/mnist.py)")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--zero", action="store_true", help="shard the optimizer state across processes (ZeRO-1)")
    parser.add_argument("--bucket-mb", type=float, default=25.0, help="size of a gradient bucket in megabytes")
    parser.add_argument("--no-overlap", dest="overlap", action="store_false",
                        help="all-reduce the gradients after the backward pass instead of during it")
    parser.add_argument("--out", default=os.path.join("runs", "mnist_distributed"))
    parser.add_argument("--limit-train", type=int, default=None, help="use only the first N training images")
    parser.add_argument("--limit-test", type=int, default=None, help="use only the first N test images")
    parser.add_argument("--quick", action="store_true", help="a run of seconds: " + ", ".join(
        f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
        args.progress = False
    if args.epochs is None:
        args.epochs = mnist.DEFAULTS[args.model]["epochs"]
    if args.lr is None:
        args.lr = mnist.DEFAULT_LR[args.model, args.optimizer]
    if args.batch_size < 1 or args.epochs < 1:
        parser.error("--batch-size and --epochs must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    return train(parse_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
