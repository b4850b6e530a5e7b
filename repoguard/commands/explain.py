"""`repoguard explain FILE` / `repoguard explain --secret ID [PATH]`: why a file carries secrets,
or which files carry a secret — read from the incidence `repoguard analyze` wrote. With
`--secret`, the trailing PATH is the repository, as for every other command."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, print_json

NAME = "explain"
HELP = "why a file carries secrets (FILE), or which files carry a secret (--secret ID [PATH])"


def register(parser) -> None:
    """Add `explain`'s arguments to its subparser: FILE | PATH, `--secret ID`, `--repo PATH`, `--json`."""
    parser.add_argument("file", nargs="?", default=None, metavar="FILE | PATH",
                        help="a file of the repository; with --secret, the repository (default: "
                             "the current directory)")
    parser.add_argument("--secret", metavar="ID", default=None, help="list the files tied to this secret")
    parser.add_argument("--repo", metavar="PATH", default=None,
                        help="repository (default: the one containing FILE, else the current directory)")
    add_json_flag(parser)


def run(args) -> int:
    """Print why a file carries secrets (FILE), or which files carry `--secret ID`, from the incidence
    in OUT. Returns 0; raises InputError (exit 2) when neither is given, the repository is named
    twice, PATH is not a directory, or the file is not in the analysed corpus."""
    from pathlib import Path

    from repoguard.analyzers import explain
    from repoguard.commands._common import resolve_repo
    from repoguard.core.errors import InputError
    from repoguard.analyzers.incidence import load_incidence

    if args.file is None and args.secret is None:
        raise InputError("explain: give FILE, or --secret ID [PATH]")
    where = args.repo
    if args.secret is not None and args.file is not None:   # `explain --secret ID PATH`
        if where is not None:
            raise InputError(f"explain: give the repository once: PATH ({args.file}) or --repo ({where})")
        if not Path(args.file).is_dir():
            raise InputError(f"explain --secret ID [PATH]: PATH is the repository, and {args.file} is not "
                             "a directory (to explain a file, give FILE without --secret)")
        where = args.file
    elif where is None and args.file is not None:
        where = str(_root_of(Path(args.file)))
    repo, _config, out = resolve_repo(args, where or ".", allow_plain=True)
    inc = load_incidence(out)
    if args.secret is not None:
        answer = explain.examples_of(inc, args.secret)
        text = explain.render_secret(answer)
    else:
        path = explain.relative_path(repo.root, args.file)
        explain.check_in_corpus(out, repo, path)
        from repoguard.source.corpus import load_corpus

        answer = explain.secrets_of(inc, path, load_corpus(out, repo.root))
        text = explain.render_file(answer)
    if args.json:
        print_json(answer)
    else:
        print(text)
    return 0


def _root_of(file):
    """The nearest folder above `file` holding `.git`, `.repoguard/` or `repoguard.toml`
    (the file's own folder when none does)."""
    from pathlib import Path

    d = file.resolve().parent
    while not d.is_dir() and d != d.parent:   # an absent file: its nearest existing folder
        d = d.parent
    for cand in (d, *d.parents):
        if any((cand / m).exists() for m in (".git", ".repoguard", "repoguard.toml")):
            return cand
    return d   # in no repository: the command then says so
