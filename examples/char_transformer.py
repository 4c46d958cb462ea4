"""A small causal Transformer language model over characters, trained with funcgrad on the CPU.

    python examples/char_transformer.py                  # a few minutes on 2 cores: stdlib source, 400 steps
    python examples/char_transformer.py --minutes 2      # stop training after 2 minutes
    python examples/char_transformer.py --layers 4 --d-model 192 --seq-len 256 --steps 2000
    python examples/char_transformer.py --text my_corpus.txt

The text is available offline: by default the Python standard library's own
top-level ``.py`` files, read from the running interpreter's installation
(``sysconfig.get_paths()["stdlib"]``, ~4.7 MB on CPython 3.11), split 95/5
into training and validation characters.

The model (GPT-style, pre-LayerNorm)::

    tokens i32[B, T] -> token embedding + position embedding     f32[B, T, D]
    L x [ x + MultiHeadAttention(LayerNorm(x))   causal, flash kernels
          x + MLP(LayerNorm(x))                  D -> 4D -> GELU -> D ]
    LayerNorm -> Linear(V)                                       f32[B, T, V]

trained with Adam and a warm-up + cosine learning rate, one ``funcgrad.jit``
-compiled step. Every ``--eval-every`` steps it prints the validation loss
(mean cross-entropy per character, nats) next to the unigram entropy of the
characters (what a model that ignores context can reach); at the end it
samples text with ``funcgrad.random.categorical``. Needs tqdm (the
``examples`` extra) for the progress bar; ``--no-progress`` runs without.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import sys
import sysconfig
import time
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import optim, random

# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


def stdlib_text(max_chars: int | None = None) -> str:
    """The top-level ``.py`` files of the running interpreter's standard library, concatenated (sorted by name)."""
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    if not files:
        raise SystemExit("no standard library sources found; pass --text FILE")
    parts, total = [], 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            parts.append(f.read())
        total += len(parts[-1])
        if max_chars is not None and total >= max_chars:
            break
    return "".join(parts)[:max_chars]


class Corpus(NamedTuple):
    """Characters as int32 ids: ``train`` and ``val`` i32[n], and the vocabulary (``chars[id]``)."""
    train: np.ndarray
    val: np.ndarray
    chars: str

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[i] for i in ids)


def make_corpus(text: str, val_fraction: float = 0.05) -> Corpus:
    """Char-level vocabulary over the whole text; the last ``val_fraction`` is held out."""
    chars = "".join(sorted(set(text)))
    lookup = np.zeros(max(map(ord, chars)) + 1, dtype=np.int32)
    lookup[[ord(c) for c in chars]] = np.arange(len(chars), dtype=np.int32)
    ids = lookup[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]
    split = int(len(ids) * (1 - val_fraction))
    return Corpus(ids[:split], ids[split:], chars)


def unigram_entropy(ids: np.ndarray, vocab_size: int) -> float:
    """-sum p log p over character frequencies, in nats: the loss of the best context-free model."""
    p = np.bincount(ids, minlength=vocab_size) / len(ids)
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))


def random_windows(rng: np.random.Generator, ids: np.ndarray, batch: int, seq_len: int) -> tuple[np.ndarray, ...]:
    """(inputs, targets) i32[batch, seq_len]: random windows and the same shifted by one character."""
    starts = rng.integers(0, len(ids) - seq_len - 1, size=batch)
    windows = ids[starts[:, None] + np.arange(seq_len + 1)]
    return windows[:, :-1], windows[:, 1:]


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------


class Config(NamedTuple):
    vocab_size: int
    seq_len: int = 128
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 2


class Block(nn.Layer):
    """Pre-LayerNorm Transformer block over f32[B, T, D]: attention, then a GELU MLP, each residual."""

    def __init__(self, num_heads: int, d_model: int):
        self.norm1, self.norm2 = nn.LayerNorm(), nn.LayerNorm()
        self.attention = nn.MultiHeadAttention(num_heads, causal=True, impl="flash")
        self.mlp = nn.Sequential(nn.Linear(4 * d_model), nn.GELU(), nn.Linear(d_model))

    def init(self, key, input_shape):
        keys = random.split(key, 4)
        params = {"norm1": self.norm1.init(keys[0], input_shape)[0],
                  "attention": self.attention.init(keys[1], input_shape)[0],
                  "norm2": self.norm2.init(keys[2], input_shape)[0],
                  "mlp": self.mlp.init(keys[3], input_shape)[0]}
        return params, tuple(input_shape)

    def apply(self, params, x, *, key=None, train=False):
        x = x + self.attention.apply(params["attention"], self.norm1.apply(params["norm1"], x))
        return x + self.mlp.apply(params["mlp"], self.norm2.apply(params["norm2"], x))


class CharTransformer(nn.Layer):
    """i32[B, T] (T <= seq_len) -> logits f32[B, T, vocab_size].

    >>> model = CharTransformer(Config(vocab_size=100))
    >>> params, _ = model.init(random.key(0), (-1, 128))
    >>> logits = model.apply(params, np.zeros((8, 128), np.int32))     # f32[8, 128, 100]
    """

    def __init__(self, config: Config):
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model, table_init=nn.initializers.normal(0.02))
        self.blocks = [Block(config.num_heads, config.d_model) for _ in range(config.num_layers)]
        self.norm = nn.LayerNorm()
        self.head = nn.Linear(config.vocab_size)

    def init(self, key, input_shape):
        c = self.config
        keys = random.split(key, len(self.blocks) + 3)
        hidden = tuple(input_shape) + (c.d_model,)
        params = {"embed": self.embed.init(keys[0], input_shape)[0],
                  "position": 0.02 * random.normal(keys[1], (c.seq_len, c.d_model)),
                  "blocks": [b.init(k, hidden)[0] for b, k in zip(self.blocks, keys[3:])],
                  "norm": self.norm.init(None, hidden)[0],
                  "head": self.head.init(keys[2], hidden)[0]}
        return params, tuple(input_shape) + (c.vocab_size,)

    def apply(self, params, x, *, key=None, train=False):
        x = self.embed.apply(params["embed"], x) + params["position"][: x.shape[1]]
        for block, p in zip(self.blocks, params["blocks"]):
            x = block.apply(p, x)
        return self.head.apply(params["head"], self.norm.apply(params["norm"], x))


def count_params(params: Any) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in fg.tree_util.tree_leaves(params))


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------


def make_functions(model: CharTransformer, opt: optim.GradientTransformation,
                   jit: bool = True) -> tuple[Callable, Callable]:
    """The training step and the validation loss, compiled with ``funcgrad.jit`` unless ``jit=False``
    (eager: no compile wait, slower steps -- what the quick test uses)."""
    compile_ = fg.jit if jit else (lambda f: f)

    def loss_fn(params, inputs, targets):
        # mean cross-entropy per character (nats), over f32[B*T, V] logits
        logits = model.apply(params, inputs)
        return nn.cross_entropy(fnp.reshape(logits, (-1, logits.shape[-1])), fnp.reshape(targets, (-1,)))

    @compile_
    def train_step(params, opt_state, inputs, targets):
        loss, grads = fg.value_and_grad(loss_fn)(params, inputs, targets)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    return train_step, compile_(loss_fn)


def make_optimizer(lr: float, steps: int) -> optim.GradientTransformation:
    """Adam, gradients clipped to norm 1, learning rate warming up over 5% of the steps then cosine to lr/10."""
    warmup = max(1, steps // 20)
    schedule = optim.warmup_cosine_decay_schedule(0.0, lr, warmup, max(steps, warmup), end_value=lr / 10)
    return optim.chain(optim.clip_by_global_norm(1.0), optim.adam(schedule))


def evaluate(eval_loss: Callable, params: Any, batches: list[tuple[np.ndarray, np.ndarray]]) -> float:
    return float(np.mean([float(eval_loss(params, x, y)) for x, y in batches]))


def train(args: argparse.Namespace, corpus: Corpus, log: Callable[[str], None] = print) -> dict:
    """Train for ``args.steps`` steps (or ``args.minutes``); returns the losses, entropies and a sample."""
    config = Config(len(corpus.chars), args.seq_len, args.d_model, args.heads, args.layers)
    model = CharTransformer(config)
    key, init_key, sample_key = random.split(random.key(args.seed), 3)
    params, _ = model.init(init_key, (args.batch_size, args.seq_len))
    opt = make_optimizer(args.lr, args.steps)
    opt_state = opt.init(params)
    train_step, eval_loss = make_functions(model, opt, jit=args.jit)

    rng = np.random.default_rng(args.seed)
    val_batches = [random_windows(rng, corpus.val, args.batch_size, args.seq_len) for _ in range(args.eval_batches)]
    entropy = unigram_entropy(corpus.train, config.vocab_size)
    log(f"corpus: {len(corpus.train):,} training / {len(corpus.val):,} validation characters, vocabulary "
        f"{config.vocab_size}; model: {count_params(params):,} parameters, {config.num_layers} layers, "
        f"D={config.d_model}, {config.num_heads} heads, T={config.seq_len}")
    initial = evaluate(eval_loss, params, val_batches)
    log(f"unigram entropy of the characters: {entropy:.3f} nats; initial validation loss {initial:.3f} nats "
        f"(uniform: {math.log(config.vocab_size):.3f})")

    history: dict[str, list] = {"step": [], "train_loss": [], "val_step": [0], "val_loss": [initial]}
    start = time.perf_counter()
    bar = _progress(args.steps, args.progress)
    step = 0
    for step in range(1, args.steps + 1):
        inputs, targets = random_windows(rng, corpus.train, args.batch_size, args.seq_len)
        params, opt_state, loss = train_step(params, opt_state, inputs, targets)
        history["step"].append(step)
        history["train_loss"].append(float(loss))
        out_of_time = args.minutes is not None and time.perf_counter() - start > 60 * args.minutes
        if step % args.eval_every == 0 or step == args.steps or out_of_time:
            val = evaluate(eval_loss, params, val_batches)
            history["val_step"].append(step)
            history["val_loss"].append(val)
            _report(bar, log, f"step {step}: train {np.mean(history['train_loss'][-args.eval_every:]):.3f}, "
                              f"validation {val:.3f} nats (unigram entropy {entropy:.3f})")
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{float(loss):.3f}")
        if out_of_time:
            log(f"--minutes {args.minutes} reached after {step} of {args.steps} steps")
            break
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - start
    sample = generate(model, params, corpus, args.sample_prompt, args.sample_chars, sample_key, args.temperature,
                      jit=args.jit)
    log(f"trained {step} steps in {seconds:.0f} s ({step * args.batch_size * args.seq_len / seconds:,.0f} chars/s): "
        f"validation loss {history['val_loss'][-1]:.3f} nats vs unigram entropy {entropy:.3f} nats")
    log("sample:\n" + "-" * 60 + "\n" + sample + "\n" + "-" * 60)
    return dict(history, unigram_entropy=entropy, seconds=seconds, steps=step, sample=sample,
                num_params=count_params(params))


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:   # tqdm is an optional extra: train without a bar
        return None
    return tqdm(total=total, unit="step", dynamic_ncols=True)


def _report(bar: Any, log: Callable[[str], None], message: str) -> None:
    (bar.write if bar is not None else log)(message)


# --------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------


def generate(model: CharTransformer, params: Any, corpus: Corpus, prompt: str, num_chars: int, key: Any,
             temperature: float = 0.8, jit: bool = True) -> str:
    """Continue ``prompt`` by ``num_chars`` characters drawn with ``random.categorical``.

    The model always sees a fixed (1, seq_len) window (one jitted shape):
    the last seq_len characters, right-padded. Attention is causal, so the
    padding after position ``n - 1`` cannot change the logits there.
    """
    seq_len = model.config.seq_len
    index = {c: i for i, c in enumerate(corpus.chars)}
    ids = [index[c] for c in prompt if c in index] or [0]

    def next_char(params, window, position, key):
        logits = model.apply(params, window)[0]                  # f32[T, V]
        return random.categorical(key, fnp.take(logits, position, axis=0) / temperature)

    if jit:
        next_char = fg.jit(next_char)

    for _ in range(num_chars):
        context = ids[-seq_len:]
        window = np.zeros((1, seq_len), np.int32)
        window[0, :len(context)] = context
        key, sub = random.split(key)
        ids.append(int(next_char(params, window, np.int32(len(context) - 1), sub)))
    return corpus.decode(ids)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every default; options whose default depends on others say so in their help instead."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None:
            return action.help or ""
        return super()._get_help_string(action)


# --quick: a run of seconds that exercises everything (tiny model, few steps, a small part of the text).
QUICK = dict(max_chars=20_000, steps=20, batch_size=8, seq_len=32, d_model=32, heads=2, layers=1, eval_every=10,
             eval_batches=1, sample_chars=20)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=_HelpFormatter)
    ap.add_argument("--text", default=None, help="a UTF-8 text file (default: the standard library's sources)")
    ap.add_argument("--max-chars", type=int, default=None,
                    help="use only the first N characters of the text (default: all)")
    ap.add_argument("--steps", type=int, default=400, help="AdamW steps")
    ap.add_argument("--minutes", type=float, default=None,
                    help="stop training after this many minutes (default: no time limit)")
    ap.add_argument("--batch-size", type=int, default=32, help="windows per step")
    ap.add_argument("--seq-len", type=int, default=128, help="characters per window (the context)")
    ap.add_argument("--d-model", type=int, default=128, help="width of the residual stream")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (divide --d-model)")
    ap.add_argument("--layers", type=int, default=2, help="Transformer blocks")
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    ap.add_argument("--eval-every", type=int, default=100, help="steps between validation losses")
    ap.add_argument("--eval-batches", type=int, default=8, help="validation batches")
    ap.add_argument("--sample-chars", type=int, default=400, help="length of the final sample")
    ap.add_argument("--sample-prompt", default="def ", help="the sample's first characters")
    ap.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    ap.add_argument("--seed", type=int, default=0, help="initialisation, batches and sampling")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                    help="a progress bar (needs tqdm)")
    ap.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                    help="compile the step (--no-jit: run eagerly, no compile wait)")
    ap.add_argument("--quick", action="store_true",
                    help="seconds: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    args = ap.parse_args(argv)
    if args.quick:                       # tiny defaults; options given explicitly still win
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    if args.max_chars is not None and args.max_chars < 1:
        ap.error(f"--max-chars must be positive, got {args.max_chars}")
    if args.minutes is not None and args.minutes <= 0:
        ap.error(f"--minutes must be positive, got {args.minutes}")
    if args.temperature <= 0 or args.lr <= 0 or args.heads < 1 or args.d_model < 1 or args.layers < 1:
        ap.error("--temperature, --lr, --heads, --d-model and --layers must be positive")
    if min(args.steps, args.batch_size, args.seq_len, args.eval_every, args.eval_batches) < 1:
        ap.error("--steps, --batch-size, --seq-len, --eval-every and --eval-batches must be positive")
    if args.d_model % args.heads:
        ap.error(f"--d-model {args.d_model} must be divisible by --heads {args.heads}")
    return args


def load_text(args: argparse.Namespace) -> str:
    """The training text: ``--text`` (UTF-8), else the standard library's sources; a bad file exits with one line."""
    if args.text is None:
        return stdlib_text(args.max_chars)
    try:
        with open(args.text, encoding="utf-8") as f:
            return f.read()[:args.max_chars]
    except OSError as e:
        raise SystemExit(f"error: --text {args.text}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SystemExit(f"error: --text {args.text}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    text = load_text(args)
    if not text:
        raise SystemExit(f"error: --text {args.text}: the file is empty")
    corpus = make_corpus(text)
    if min(len(corpus.train), len(corpus.val)) < args.seq_len + 2:
        raise SystemExit(f"error: the text's validation part has {len(corpus.val)} characters (the last 5%); "
                         f"--seq-len {args.seq_len} needs at least {args.seq_len + 2}: a longer text or a smaller "
                         "--seq-len")
    return train(args, corpus)


if __name__ == "__main__":
    main(sys.argv[1:])
