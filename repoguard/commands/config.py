"""`repoguard config validate [PATH]`: print the resolved config or a one-line error."""
from __future__ import annotations

from pathlib import Path

from repoguard.commands._common import common_options, print_json

NAME = "config"
HELP = "validate and show the repoguard.toml configuration"


def register(parser) -> None:
    """Add the `validate` action (PATH, `--json`) to `config`'s subparser."""
    sub = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    v = sub.add_parser("validate", help="validate a config and print it resolved",
                       parents=[common_options(suppress=True)],
                       description="Validate the file named by --config, else PATH (a repoguard.toml, "
                       "or a directory holding one; default ./repoguard.toml), and print it resolved.")
    v.add_argument("target", nargs="?", default=None, metavar="PATH")
    v.add_argument("--json", action="store_true", help="print the resolved config as JSON")


def run(args) -> int:
    """Validate the config file `--config` or PATH names and print it resolved (or as `--json`).
    Returns 0; raises InputError (exit 2) for a missing or invalid file, or for both PATH and
    `--config` naming different files."""
    from repoguard.core.config import CONFIG_FILENAME, load_config
    from repoguard.core.errors import InputError

    target = args.target or CONFIG_FILENAME
    if args.config:
        # The named file is the one validated; PATH, if given, may only be a directory.
        if args.target and not Path(args.target).is_dir() and \
                Path(args.target).resolve() != Path(args.config).resolve():
            raise InputError(f"{args.target}: give the file to validate either as PATH or with "
                             f"--config ({args.config}), not both")
        target = args.config
    cfg = load_config(Path(target), required=True)
    if args.json:
        print_json(cfg.to_dict())
        return 0
    print(f"{cfg.path}: valid")
    print(f"defaults: p = {cfg.defaults.p:g}, r = {cfg.defaults.r:g}")
    for name, prot in sorted(cfg.levels.items()):
        print(f"level {name}: p = {prot.p:g}, r = {prot.r:g}")
    print(f"corpus: max_file_bytes = {cfg.corpus.max_file_bytes}, example_max_chars = "
          f"{cfg.corpus.example_max_chars}, exclude = {list(cfg.corpus.exclude)}")
    print(f"{len(cfg.secrets)} secret(s):")
    for s in cfg.secrets:
        src = f"level {s.level}" if s.level else "explicit/default"
        print(f"  {s.id}: p = {s.p:g}, r = {s.r:g} ({src}); paths {list(s.paths)}; owners "
              f"{list(s.owners)}; codenames {list(s.codenames)}; propagate imports={s.propagate.imports} "
              f"owners={s.propagate.owners} authors={s.propagate.authors} "
              f"cochange={s.propagate.cochange} codenames={s.propagate.codenames}")
    return 0
