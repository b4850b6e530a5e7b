"""The embedded base model: a tiny Llama pretrained on the interpreter's standard library, cached.

DP fine-tuning works because it starts from a model that already knows the language: a randomly
initialised base learns nothing useful in a few hundred noisy steps. Every machine that runs
repoguard has a public code corpus offline — the running Python's standard-library source
(`sysconfig.get_paths()["stdlib"]`, `*.py`) — so the embedded default is pretrained on it: the
byte-level BPE tokenizer is fitted on that corpus only (never on the repository), then every weight
is trained by plain AdamW (no clipping per example, no noise: public data, nothing to protect),
from a fixed seed, so the same interpreter and library versions always give the same model.

Left out of the corpus: test suites (`test/`, `tests/`, `idle_test/`: deliberately odd files, bad
encodings, huge literals), `encodings/` (generated charmap tables), `pydoc_data/` (prose in one
string), `site-packages/`/`dist-packages/` (third-party, differ per machine), and any file that is
unreadable or not UTF-8.

The model is built once per (corpus, config, library versions) and cached in
`<cache>/base-<key>/` where <cache> is `$REPOGUARD_CACHE_DIR`, else `$XDG_CACHE_HOME/repoguard`,
else `~/.cache/repoguard`; <key> is a digest of the corpus (file list and contents), the
`PretrainConfig` and the torch/transformers/tokenizers versions. Building is concurrency-safe: a
file lock serialises builders, the model is written into a temporary directory and renamed into
place, and a directory is used only when its `meta.json` lists every file with a matching SHA-256
(a half-written or corrupt one is rebuilt).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from repoguard.core.artefacts import file_sha256
from repoguard.core.errors import InputError
from repoguard.training.cache import cache_root  # noqa: F401  (re-exported: tests, pretrained bases)
from repoguard.training.model import TinyConfig

log = logging.getLogger("repoguard")

FORMAT = 1
SKIP_DIRS = frozenset({"test", "tests", "idle_test", "encodings", "pydoc_data", "site-packages",
                       "dist-packages", "__pycache__"})
MAX_FILE_BYTES = 1 << 20
VAL_EVERY = 50          # every 50th file (sorted order) is held out for the base's validation loss

builds = 0              # builds in this process (tests: a cached base is never rebuilt)


@dataclass(frozen=True)
class PretrainConfig:
    """How the embedded base is pretrained: model size, AdamW steps of `batch_size` windows of
    `seq_len` tokens, peak learning rate `lr` (linear warm-up over `warmup` of the steps, cosine
    decay to a tenth), weight decay, gradient-norm clip and the seed of the weights and windows."""

    size: TinyConfig = field(default_factory=TinyConfig)
    steps: int = 1000
    batch_size: int = 8
    seq_len: int = 256
    lr: float = 3e-3
    warmup: float = 0.05
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0


DEFAULT = PretrainConfig()


def stdlib_root() -> Path:
    """The running interpreter's standard-library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_corpus(root: Path | None = None) -> list[tuple[str, str]]:
    """(relative path, text) of the corpus files under `root` (default `stdlib_root()`), sorted by
    path: `*.py` outside SKIP_DIRS, at most MAX_FILE_BYTES, valid UTF-8.

    Raises InputError when no file qualifies (no standard-library source on this machine)."""
    root = Path(root) if root is not None else stdlib_root()
    files = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if SKIP_DIRS.intersection(rel.parts[:-1]):
            continue
        try:
            if p.stat().st_size > MAX_FILE_BYTES or not p.is_file():
                continue
            text = p.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text.strip():
            files.append((rel.as_posix(), text))
    if not files:
        raise InputError(f"{root}: no Python standard-library source to pretrain the embedded model on; "
                         "pass --model DIR")
    return files


def corpus_digest(corpus: list[tuple[str, str]]) -> str:
    """SHA-256 (hex) of the file list and every file's contents."""
    h = hashlib.sha256()
    for rel, text in corpus:
        h.update(rel.encode() + b"\0" + hashlib.sha256(text.encode()).digest())
    return h.hexdigest()


_DIGESTS: dict = {}


def _stdlib_digest() -> str:
    """`corpus_digest(stdlib_corpus())`, read once per process (the library does not change while
    a process runs)."""
    root = str(stdlib_root())
    if root not in _DIGESTS:
        _DIGESTS[root] = corpus_digest(stdlib_corpus())
    return _DIGESTS[root]


def cache_key(digest: str, config: PretrainConfig = DEFAULT) -> str:
    """16 hex digits naming the cached base: the corpus digest, the config and the versions of the
    libraries whose numerics or file formats decide the weights."""
    import tokenizers
    import torch
    import transformers

    doc = {"format": FORMAT, "corpus": digest, "config": dataclasses.asdict(config),
           "versions": [torch.__version__, transformers.__version__, tokenizers.__version__]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def ensure_base(*, config: PretrainConfig = DEFAULT, cache_dir: Path | None = None,
                corpus: list[tuple[str, str]] | None = None, show_progress: bool = True) -> Path:
    """The directory of the cached base for `config` (a Hugging Face checkpoint plus `meta.json`),
    building it first when absent, half-written or corrupt.

    Raises InputError when the cache directory cannot be created or a corrupt entry not removed."""
    digest = corpus_digest(corpus) if corpus is not None else _stdlib_digest()
    key = cache_key(digest, config)
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    final = root / f"base-{key}"
    if _valid(final, key):
        return final
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{root}: cannot create the model cache ({exc.strerror}); "
                         "set REPOGUARD_CACHE_DIR to a writable directory") from None
    from filelock import FileLock, Timeout

    lock = FileLock(str(root / f"base-{key}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("waiting for another process building the embedded base model in %s", final)
        lock.acquire()
    try:
        if _valid(final, key):
            return final
        if final.exists():
            log.warning("%s: incomplete or corrupt embedded base model; rebuilding it", final)
            _remove(final)
        corpus = corpus if corpus is not None else stdlib_corpus()
        log.info("building the embedded base model (tiny Llama pretrained on %d standard-library files, "
                 "%d steps; once per machine) into %s", len(corpus), config.steps, final)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".base-{key}-"))
        try:
            meta = _build(tmp, corpus, config, show_progress=show_progress)
            meta.update(key=key, format=FORMAT,
                        files={p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()})
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
            os.chmod(tmp, 0o755)        # mkdtemp makes it 0700; the model is public (a shared cache)
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final
    finally:
        lock.release()


def embedded_base(*, max_length: int, device=None, show_progress: bool = True,
                  config: PretrainConfig = DEFAULT, cache_dir: Path | None = None):
    """(model, tokenizer): the cached pretrained base (built if needed, `ensure_base`) on `device`
    (default CPU), fp32, accepting sequences of `max_length` tokens.

    Raises InputError like `ensure_base` and `model.load_model`."""
    import torch

    from repoguard.training.model import load_model

    path = ensure_base(config=config, cache_dir=cache_dir, show_progress=show_progress)
    model, tok = load_model(path, device=device if device is not None else torch.device("cpu"), bf16=False)
    # RoPE has no learned positions: a longer window only needs the config to say so.
    model.config.max_position_embeddings = max(model.config.max_position_embeddings, int(max_length))
    return model, tok


def _build(dest: Path, corpus: list[tuple[str, str]], config: PretrainConfig, *, show_progress: bool) -> dict:
    """Fit the tokenizer on the corpus (minus the validation files), pretrain every weight with
    AdamW and save the checkpoint into `dest`. Returns the build's figures for `meta.json`."""
    global builds
    import numpy as np
    import torch

    from repoguard.core.progress import progress
    from repoguard.training.model import save_base_model, tiny_llama, train_tokenizer

    t0 = time.perf_counter()
    train = [t for i, (_, t) in enumerate(corpus) if i % VAL_EVERY != VAL_EVERY - 1]
    val = [t for i, (_, t) in enumerate(corpus) if i % VAL_EVERY == VAL_EVERY - 1] or train[:1]
    tok = train_tokenizer(train, vocab_size=config.size.vocab_size)
    stream, val_stream = _stream(train, tok), _stream(val, tok)
    L = config.seq_len - 1                          # BOS + L corpus tokens per window
    if len(stream) <= L + 1:
        raise InputError("the standard-library corpus is too small to pretrain the embedded model")
    rng = np.random.default_rng(config.seed)
    threads = torch.get_num_threads()
    if not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(1)                    # tiny ops: threads cost more than they give
    try:
        model, tok = tiny_llama(tok, seed=config.seed, size=config.size)
        bos = torch.full((config.batch_size, 1), tok.bos_token_id, dtype=torch.long)
        val_windows = _val_windows(val_stream, L, bos[:1])
        val_init = _loss(model, val_windows)
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.95),
                                weight_decay=config.weight_decay)
        warm = max(1, int(config.warmup * config.steps))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, 0.1 + 0.45 * (
            1 + np.cos(np.pi * max(0, s - warm) / max(1, config.steps - warm)))))
        model.train()
        bar = progress("pretraining the embedded base", total=config.steps) if show_progress \
            else contextlib.nullcontext(lambda n=1: None)
        with torch.random.fork_rng(devices=[]), bar as advance:
            torch.manual_seed(config.seed)
            for _ in range(config.steps):
                starts = rng.integers(0, len(stream) - L, size=config.batch_size)
                x = torch.cat([bos, torch.from_numpy(np.stack([stream[s:s + L] for s in starts]))], dim=1)
                loss = model(input_ids=x, labels=x).loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                opt.step()
                sched.step()
                advance()
        model.eval()
        val_loss = _loss(model, val_windows)
    finally:
        torch.set_num_threads(threads)
    save_base_model(model, tok, dest)
    builds += 1
    return {"corpus_files": len(corpus), "train_tokens": int(len(stream)), "val_files": len(val),
            "val_tokens": int(len(val_stream)), "val_loss_init": val_init, "val_loss": val_loss,
            "seconds": round(time.perf_counter() - t0, 1), "config": dataclasses.asdict(config)}


def _stream(texts, tok):
    """One int64 array: BOS text EOS for every text, in order."""
    import numpy as np

    ids = tok(list(texts), add_special_tokens=False)["input_ids"]
    parts = [np.array([tok.bos_token_id, *x, tok.eos_token_id], dtype=np.int64) for x in ids]
    return np.concatenate(parts)


def _val_windows(stream, L: int, bos, n: int = 32):
    """Up to `n` evenly spaced, non-overlapping validation windows (BOS + L tokens)."""
    import numpy as np
    import torch

    count = max(1, min(n, (len(stream) - 1) // L))
    starts = np.linspace(0, len(stream) - L, count).astype(int)
    rows = torch.from_numpy(np.stack([stream[s:s + L] for s in starts]))
    return torch.cat([bos.expand(len(starts), 1), rows], dim=1)


def _loss(model, x) -> float:
    """Mean next-token cross-entropy (nats/token) of `model` on windows `x` (n, L)."""
    import torch

    with torch.no_grad():
        return float(model(input_ids=x, labels=x).loss)


def _valid(d: Path, key: str) -> bool:
    """True when `d/meta.json` names `key` and every file it lists is present with its SHA-256."""
    try:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        files = meta["files"]
        return (meta.get("key") == key and meta.get("format") == FORMAT and "config.json" in files
                and all(file_sha256(d / name) == digest for name, digest in files.items()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _remove(d: Path) -> None:
    """Delete a corrupt cache entry. Raises InputError when it cannot be removed."""
    try:
        shutil.rmtree(d)
    except OSError as exc:
        raise InputError(f"{d}: corrupt embedded base model that cannot be removed ({exc.strerror}); "
                         "delete it or set REPOGUARD_CACHE_DIR") from None


MANIFEST = "manifest.json"      # in OUT/train/base_model/: every file's SHA-256, written with it


def write_manifest(d: Path) -> str:
    """Record the SHA-256 of every file in `d` (a saved base model) in `d/manifest.json`; returns
    the manifest's own SHA-256, the base's identity (recorded in each checkpoint)."""
    d = Path(d)
    files = {p.name: file_sha256(p) for p in sorted(d.iterdir()) if p.is_file() and p.name != MANIFEST}
    data = json.dumps({"format": FORMAT, "files": files}, indent=2, sort_keys=True).encode()
    (d / MANIFEST).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def check_manifest(d: Path) -> str:
    """Verify `d` against its `manifest.json` (`write_manifest`) before a resume loads it; returns
    the manifest's SHA-256. Raises InputError naming the first missing, extra or changed file."""
    d = Path(d)
    m = d / MANIFEST
    try:
        data = m.read_bytes()
        files = json.loads(data)["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not a table")
    except FileNotFoundError:
        raise InputError(f"{m}: missing, so {d} cannot be checked before --resume (written by an older "
                         "repoguard, or changed); start afresh without --resume") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{m}: corrupt ({exc}); start afresh without --resume") from None
    present = {p.name for p in d.iterdir() if p.is_file() and p.name != MANIFEST}
    for name in sorted(present | set(files)):
        f = d / name
        if name not in files:
            raise InputError(f"{f}: not part of the base model the run started from; resuming would "
                             "train a different model (start afresh without --resume)")
        if name not in present or file_sha256(f) != files[name]:
            raise InputError(f"{f}: {'missing' if name not in present else 'changed'} since the run started "
                             "(SHA-256 differs from manifest.json); resuming would train a different model "
                             "(start afresh without --resume)")
    return hashlib.sha256(data).hexdigest()

