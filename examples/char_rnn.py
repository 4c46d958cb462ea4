"""A character-level GRU language model, its loop over time one ``lax.scan``, trained with funcgrad on the CPU.

    python examples/char_rnn.py                          # under a minute on 2 cores: 400 steps
    python examples/char_rnn.py --steps 2000 --hidden 256
    python examples/char_rnn.py --text my_corpus.txt
    python examples/char_rnn.py --quick                  # seconds: tiny sizes (explicit options win)
    python examples/char_rnn.py --steps 5 --hidden 16 --no-jit      # a smoke test: seconds, nothing compiled

The model reads ``--seq-len`` characters and predicts each next one::

    tokens i32[B, T] -> one_hot(tokens) @ table f32[V, 3H] + bias          (the GRU's input projection)
    lax.scan over T:  h = GRU(h, x_t)                                       f32[B, H] carry, hs f32[T, B, H]
    hs @ W_out + b_out -> logits f32[T, B, V] -> cross-entropy against the next characters

The scan is one operation: ``jit`` compiles the GRU step once and the loop
calls it, however long the sequence (a Python ``for`` over time would be
unrolled into the trace). The training step is
``fg.jit(fg.value_and_grad(loss))`` plus Adam. Sampling is a ``lax.scan``
too: its carry is the hidden state and the last character, its ``xs`` are
random keys, one per character (``random.categorical`` inside the loop).

The text is generated (``make_text``: ~50,000 characters of sentences from a
small grammar, seeded; nothing is downloaded), the last 10% held out. It
prints the validation loss next to the unigram entropy of the characters
(the best loss without context) and ends with a sample.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, nn, optim, random

# A small grammar of sentences about a lighthouse; ``make_text`` draws from it
# (seeded), so the text is large enough that the held-out part measures what
# the model learned (spelling, words, word order) rather than memorised lines.
SUBJECTS = ["the keeper", "the old keeper", "his daughter", "a fisherman", "the gulls", "the ships", "the wind",
            "the grey sea", "the tide", "the lamp"]
VERBS = ["watched", "carried", "counted", "mended", "painted", "followed", "passed", "crossed", "lit", "turned",
         "found", "left"]
OBJECTS = ["the light", "the long spit of sand", "the small boat", "the rocks", "the door", "the lens",
           "the book of weather", "a can of oil", "the garden", "the water", "the fence", "the harbour"]
TIMES = ["at dawn", "in the evening", "before the storm", "all night long", "in the spring", "after the rain",
         "every day", "in winter", "when the sun went down"]


def make_text(num_sentences: int = 1000, seed: int = 0) -> str:
    """Sentences drawn from the grammar above (one or two clauses ``subject verb object [time]``), five
    to a paragraph.

    >>> make_text(2, seed=1)
    'The gulls passed the water when the sun went down. His daughter mended the fence. '
    """
    rng = np.random.default_rng(seed)
    pick = lambda words: words[rng.integers(len(words))]   # noqa: E731

    def clause() -> str:
        words = [pick(SUBJECTS), pick(VERBS), pick(OBJECTS)] + ([pick(TIMES)] if rng.random() < 0.6 else [])
        return " ".join(words)

    parts = []
    for i in range(num_sentences):
        sentence = clause() + (", and " + clause() if rng.random() < 0.2 else "")
        parts.append(sentence[0].upper() + sentence[1:] + ".")
        parts.append("\n\n" if i % 5 == 4 else " ")
    return "".join(parts)


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


class Corpus(NamedTuple):
    """Characters as int32 ids, ``train`` and ``val`` i32[n], and the vocabulary (``chars[id]``)."""
    train: np.ndarray
    val: np.ndarray
    chars: str

    def encode(self, text: str) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.chars)}
        return np.array([index[c] for c in text if c in index], dtype=np.int32)

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[i] for i in ids)


def make_corpus(text: str, val_fraction: float = 0.1) -> Corpus:
    """A character vocabulary over ``text`` (sorted); the last ``val_fraction`` is held out."""
    chars = "".join(sorted(set(text)))
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text], dtype=np.int32)
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
# Model: a GRU over time with lax.scan
# --------------------------------------------------------------------------


def init_params(key: Any, vocab_size: int, hidden: int) -> dict:
    """GRU parameters; the gates are stacked as [update z | reset r | candidate n] along the last axis.

    >>> params = init_params(random.key(0), vocab_size=40, hidden=64)
    >>> params["inputs"].shape, params["recurrent"].shape      # ((40, 192), (64, 192))
    """
    k_in, k_rec, k_out = random.split(key, 3)
    glorot = nn.initializers.glorot_uniform()
    return {"inputs": glorot(k_in, (vocab_size, 3 * hidden)),       # one-hot x @ W_x is a row of this table
            "recurrent": glorot(k_rec, (hidden, 3 * hidden)),
            "bias": fnp.zeros(3 * hidden),
            "out_w": glorot(k_out, (hidden, vocab_size)),
            "out_b": fnp.zeros(vocab_size)}


def gru_cell(params: dict, h: Any, x_proj: Any) -> Any:
    """One GRU step: ``h`` f32[B, H] and the input's projection ``x_proj`` f32[B, 3H] -> the new ``h``."""
    hidden = h.shape[-1]
    h_proj = h @ params["recurrent"]
    z = nn.sigmoid(x_proj[:, :hidden] + h_proj[:, :hidden])
    r = nn.sigmoid(x_proj[:, hidden:2 * hidden] + h_proj[:, hidden:2 * hidden])
    n = fnp.tanh(x_proj[:, 2 * hidden:] + r * h_proj[:, 2 * hidden:])
    return (1 - z) * n + z * h


def input_projection(params: dict, tokens: Any) -> Any:
    """i32[...] -> f32[..., 3H]: the input table's rows for ``tokens``, plus the bias.

    Written as ``one_hot(tokens) @ table``: with a vocabulary of a few dozen
    characters the matmul is cheap, and its gradient is a matmul too (a row
    gather's gradient is a scatter-add, slower here).
    """
    vocab = params["inputs"].shape[0]
    return nn.one_hot(tokens, vocab) @ params["inputs"] + params["bias"]


def logits_over_time(params: dict, tokens: Any, h0: Any) -> tuple[Any, Any]:
    """i32[B, T] and h0 f32[B, H] -> (logits f32[T, B, V], the last h): one ``lax.scan`` over time."""
    xs = input_projection(params, fnp.swapaxes(tokens, 0, 1))         # f32[T, B, 3H], time leading

    def step(h, x_proj):
        h = gru_cell(params, h, x_proj)
        return h, h

    h_last, hs = lax.scan(step, h0, xs)                              # hs: f32[T, B, H]
    return hs @ params["out_w"] + params["out_b"], h_last


def loss_fn(params: dict, inputs: Any, targets: Any) -> Any:
    """Mean cross-entropy per character (nats), starting every window from h = 0."""
    hidden = params["recurrent"].shape[0]
    logits, _ = logits_over_time(params, inputs, fnp.zeros((inputs.shape[0], hidden)))
    return nn.cross_entropy(fnp.reshape(logits, (-1, logits.shape[-1])),
                            fnp.reshape(fnp.swapaxes(targets, 0, 1), (-1,)))


def make_functions(opt: optim.GradientTransformation, jit: bool = True) -> tuple[Callable, Callable]:
    """The training step ``(params, opt_state, inputs, targets) -> (params, opt_state, loss)`` and the
    loss, compiled with ``funcgrad.jit`` unless ``jit=False`` (eager: no compile wait, slower steps)."""
    compile_ = fg.jit if jit else (lambda f: f)

    def train_step(params, opt_state, inputs, targets):
        loss, grads = fg.value_and_grad(loss_fn)(params, inputs, targets)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    return compile_(train_step), compile_(loss_fn)


# --------------------------------------------------------------------------
# Sampling: a scan whose xs are random keys
# --------------------------------------------------------------------------


def make_sampler(num_chars: int, temperature: float, jit: bool = True) -> Callable:
    """``sample(params, prompt i32[P], key) -> i32[num_chars]``: read the prompt, then draw characters.

    Both loops are ``lax.scan``: over the prompt's characters (carry h),
    then over ``num_chars`` keys (carry h and the last character).
    """

    def sample(params, prompt, key):
        hidden = params["recurrent"].shape[0]

        def read(h, x_proj):
            return gru_cell(params, h, x_proj), None

        x_prompt = input_projection(params, prompt)[:, None, :]      # f32[P, 1, 3H]: batch of one
        h, _ = lax.scan(read, fnp.zeros((1, hidden)), x_prompt[:-1])

        def draw(carry, k):
            h, token = carry
            h = gru_cell(params, h, input_projection(params, token))
            logits = (h @ params["out_w"] + params["out_b"])[0]
            token = random.categorical(k, logits / temperature)[None]
            return (h, token.astype(fnp.int32)), token[0]

        _, tokens = lax.scan(draw, (h, prompt[-1:]), random.split(key, num_chars))
        return tokens

    return fg.jit(sample) if jit else sample


# --------------------------------------------------------------------------
# Training loop
# --------------------------------------------------------------------------


def train(args: argparse.Namespace, corpus: Corpus, log: Callable[[str], None] = print) -> dict:
    """Train for ``args.steps`` steps; returns the training and validation losses, the unigram entropy
    and a sample."""
    vocab = len(corpus.chars)
    init_key, sample_key = random.split(random.key(args.seed))
    params = init_params(init_key, vocab, args.hidden)
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(args.lr))
    opt_state = opt.init(params)
    train_step, eval_loss = make_functions(opt, jit=args.jit)
    rng = np.random.default_rng(args.seed)
    val_batches = [random_windows(rng, corpus.val, args.batch_size, args.seq_len) for _ in range(args.eval_batches)]

    def validation_loss() -> float:
        return float(np.mean([float(eval_loss(params, x, y)) for x, y in val_batches]))

    entropy = unigram_entropy(corpus.train, vocab)
    history: dict[str, list] = {"train_loss": [], "val_step": [0], "val_loss": [validation_loss()]}
    log(f"text: {len(corpus.train):,} training / {len(corpus.val):,} validation characters, vocabulary {vocab}; "
        f"GRU hidden {args.hidden}, windows of {args.seq_len} x batch {args.batch_size}")
    log(f"initial validation loss {history['val_loss'][0]:.3f} nats (uniform {math.log(vocab):.3f}, unigram "
        f"entropy {entropy:.3f}: what a model without context reaches)")
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        inputs, targets = random_windows(rng, corpus.train, args.batch_size, args.seq_len)
        params, opt_state, loss = train_step(params, opt_state, inputs, targets)
        history["train_loss"].append(float(loss))
        if step == 1:
            how = "tracing and compiling the step, or loading its kernels from the cache" if args.jit else "eager"
            log(f"step 1: {time.perf_counter() - start:.1f} s ({how})")
        if step % args.eval_every == 0 or step == args.steps:
            history["val_step"].append(step)
            history["val_loss"].append(validation_loss())
            log(f"step {step}: train {np.mean(history['train_loss'][-args.eval_every:]):.3f}, "
                f"validation {history['val_loss'][-1]:.3f} nats")
    seconds = time.perf_counter() - start

    prompt = corpus.encode(args.sample_prompt)
    prompt = prompt if len(prompt) else corpus.train[:1]
    tokens = np.asarray(make_sampler(args.sample_chars, args.temperature, jit=args.jit)(params, prompt, sample_key))
    sample = corpus.decode(prompt.tolist()) + corpus.decode(tokens.tolist())
    log(f"trained {args.steps} steps in {seconds:.1f} s: validation loss {history['val_loss'][0]:.3f} -> "
        f"{history['val_loss'][-1]:.3f} nats (unigram entropy {entropy:.3f})")
    log("sample:\n" + "-" * 60 + "\n" + sample + "\n" + "-" * 60)
    return dict(history, unigram_entropy=entropy, seconds=seconds, sample=sample)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every default; options whose default depends on others say so in their help instead."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None:
            return action.help or ""
        return super()._get_help_string(action)


# --quick: a run of seconds that exercises everything (tiny model, few steps).
QUICK = dict(steps=30, batch_size=8, seq_len=32, hidden=32, eval_every=15, eval_batches=1, sample_chars=40)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=_HelpFormatter)
    ap.add_argument("--text", default=None, help="a UTF-8 text file (default: generated sentences)")
    ap.add_argument("--steps", type=int, default=400, help="Adam steps")
    ap.add_argument("--batch-size", type=int, default=32, help="windows per step")
    ap.add_argument("--seq-len", type=int, default=64, help="characters per window")
    ap.add_argument("--hidden", type=int, default=128, help="GRU state size")
    ap.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate")
    ap.add_argument("--eval-every", type=int, default=100, help="steps between validation losses")
    ap.add_argument("--eval-batches", type=int, default=4, help="validation batches")
    ap.add_argument("--sample-chars", type=int, default=300, help="length of the final sample")
    ap.add_argument("--sample-prompt", default="The ", help="the sample's first characters")
    ap.add_argument("--temperature", type=float, default=0.7, help="sampling temperature")
    ap.add_argument("--seed", type=int, default=0, help="initialisation, batches and sampling")
    ap.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                    help="compile the step (--no-jit: run eagerly, no compile wait)")
    ap.add_argument("--quick", action="store_true",
                    help="seconds: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    args = ap.parse_args(argv)
    if args.quick:                       # tiny defaults; options given explicitly still win
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    if args.temperature <= 0 or args.lr <= 0:
        ap.error("--temperature and --lr must be positive")
    if min(args.steps, args.batch_size, args.seq_len, args.hidden, args.eval_every, args.eval_batches,
           args.sample_chars) < 1:
        ap.error("--steps, --batch-size, --seq-len, --hidden, --eval-every, --eval-batches and --sample-chars "
                 "must be positive")
    return args


def load_text(args: argparse.Namespace) -> str:
    """The training text: ``--text`` (UTF-8), else the generated sentences; a bad file exits with one line."""
    if args.text is None:
        return make_text()
    try:
        with open(args.text, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise SystemExit(f"error: --text {args.text}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SystemExit(f"error: --text {args.text}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    corpus = make_corpus(load_text(args))
    if min(len(corpus.train), len(corpus.val)) < args.seq_len + 2:
        raise SystemExit(f"error: the text's validation part has {len(corpus.val)} characters (the last 10%); "
                         f"--seq-len {args.seq_len} needs at least {args.seq_len + 2}: a longer text or a smaller "
                         "--seq-len")
    return train(args, corpus)


if __name__ == "__main__":
    main(sys.argv[1:])
