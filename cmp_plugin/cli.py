"""driftguard-cmp: the Config Management Plugin's commands.

Argo CD runs ``generate`` and ``parameters`` (see manifests/base/cmp/plugin.yaml: no ``discover``,
so only Applications that name the plugin use it); people and PR checks run ``render`` (and ``diff``). A refusal prints, as its first stderr line,
``driftguard: refused by <guard>: <reason>`` (errors: ``driftguard: error: ...``), then at most
30 lines of detail, one ``driftguard: gating key `<key>` ...`` line per values key behind it (the
form the notifier quotes as the cause of a prune set: driftguard/cause.py) and one line saying how
to fix or override it, and exits non-zero so that Argo CD syncs and prunes nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.params import PARAMETERS, by_name
from cmp_plugin.renderers import RENDERERS
from cmp_plugin.settings import CmpSettings
from driftguard.errors import ConfigError, DriftguardError, GuardRefusal, RenderError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from cmp_plugin.launch import Early

__all__ = ["format_failure", "main", "run"]

MAX_DETAIL_LINES = 30
_offered_proof: list[bool] = []
"""Set by generate when implicit-defaults left a proof pending (cmp_plugin/proof_background.py)."""
EXIT_REFUSED = 3
EXIT_ERROR = 2


def main(argv: list[str] | None = None, *, early: Early | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    started = time.monotonic()
    try:
        if argv == ["generate"]:
            # Argo CD's hot path: no argparse, the tool starts as early as possible
            return cmd_generate(None, early=early, started=started)
        if argv == ["--version"]:
            return cmd_version()
        args = build_parser().parse_args(argv)
        return int(args.func(args))
    except (DriftguardError, OSError) as exc:
        sys.stderr.write(format_failure(exc))
        if argv == ["generate"]:
            from cmp_plugin import render_log

            refused = isinstance(exc, GuardRefusal)
            guard = exc.guard if isinstance(exc, GuardRefusal) else ""
            render_log.record(
                os.environ,
                started=started,
                verdict="refused" if refused else "error",
                guard=guard,
                tools=_tool_versions,
            )
        return EXIT_REFUSED if isinstance(exc, GuardRefusal) else EXIT_ERROR
    except MemoryError:
        # the cap set at start (spawn.limit_resources): a clear refusal instead of the OOM killer
        sys.stderr.write(
            "driftguard: error: the render needed more memory than DRIFTGUARD_CMP_MAX_MEMORY allows; refusing it\n"
            "fix: make the chart or overlay smaller, or ask the platform team to raise DRIFTGUARD_CMP_MAX_MEMORY\n"
        )
        return EXIT_ERROR
    finally:
        if early is not None:
            early.close()  # a planned tool the render did not adopt is stopped, its scratch removed


def run(*, early: Early | None = None, report: Callable[[int], None] | None = None) -> None:
    """The console script: ``main()``, then leave without tearing the interpreter down.

    Argo CD runs ``generate`` on every manifest refresh, and unloading the ~200 modules a render
    imports cost ~12 ms at exit, a quarter of a small chart's render (bench/cmp_overhead.py). Both
    streams are flushed first, and no command leaves work in another thread when main() returns
    (a baseline lookup still waiting past its timeout is abandoned, as it should be).
    """
    code = main(early=early)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: what it got is incomplete
        code = code or EXIT_ERROR
    with contextlib.suppress(BrokenPipeError):
        sys.stderr.flush()
    later = None
    if code == 0 and _offered_proof:  # a pending implicit-defaults proof: copied while the checkout is there
        from cmp_plugin import proof_background

        later = proof_background.claim()
    if later is not None and report is None:
        from cmp_plugin import proof_background

        proof_background.detach(later)  # a child of its own session proves; this process exits
        later = None
    if later is not None:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # preloaded: out of the caller's group before the caller exits
    if report is not None:  # a preloaded render tells its caller the code (cmp_plugin/preload/server.py)
        # the command's streams are let go first: whoever reads them (argocd-cmp-server) sees
        # their end when the caller exits, not after this process has torn its memory down too
        # (/dev/null in their place: a thread left behind can never write into a reused fd)
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
        report(code)
        if later is not None:
            from cmp_plugin import proof_background

            proof_background.prove(later)  # the caller has its code and its streams' end
    os._exit(code)


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="driftguard-cmp", description="driftguard's Argo CD Config Management Plugin"
    )
    parser.add_argument(
        "--version",
        action=_version_action(),
        help="print driftguard-cmp's version and the helm and kustomize versions it renders with",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="render the app in the current directory for Argo CD")
    gen.set_defaults(func=cmd_generate)
    disc = sub.add_parser(
        "discover",
        help="print the renderer that would render the current directory (a diagnostic: the plugin has "
        "no discovery rule, Argo CD uses it only for Applications that name it)",
    )
    disc.set_defaults(func=cmd_discover)
    par = sub.add_parser("parameters", help="print the parameter announcements (JSON) for the current app")
    par.set_defaults(func=cmd_parameters)
    ren = sub.add_parser("render", help="render and guard an app directory locally, with findings for people")
    ren.add_argument("path", type=Path, help="the app directory (a chart, an overlay or plain manifests)")
    ren.add_argument(
        "--values-file", action="append", default=[], help="a values file, relative to PATH (repeatable)"
    )
    ren.add_argument(
        "--set-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any plugin parameter; arrays comma-separated (repeatable)",
    )
    ren.add_argument("--app-name", default="", help="the Application's name (release name default)")
    ren.add_argument("--namespace", default="", help="the destination namespace")
    ren.add_argument(
        "--project",
        default="",
        help="the AppProject, which picks the DRIFTGUARD_CMP_POLICY entry (default: default)",
    )
    ren.add_argument("-o", "--output", type=Path, help="write the manifests to this file")
    ren.add_argument(
        "--explain",
        action="store_true",
        help="list every resource switch implicit-defaults saw, with template:line and why it counts or not",
    )
    ren.set_defaults(func=cmd_render)
    dif = sub.add_parser(
        "diff", help="render every environment at two git revisions and show what changes, removals first"
    )
    from cmp_plugin.prcheck.diffcmd import add_arguments

    add_arguments(dif)
    img = sub.add_parser(
        "set-image",
        help="set an image's newName/newTag/digest in a kustomization's images:, keeping comments and layout",
    )
    img.add_argument("spec", metavar="NAME=IMAGE:TAG", help="also NAME=IMAGE@DIGEST, NAME:TAG, NAME@DIGEST")
    img.add_argument("--path", type=Path, required=True, help="the kustomization's directory")
    img.set_defaults(func=cmd_set_image)
    from cmp_plugin.repotools.codify import add_arguments as codify_arguments

    codify_arguments(sub.add_parser("codify", help="turn a live change into the Git edit that reproduces it"))
    hook = sub.add_parser(
        "hook", help="pre-commit hooks: stray | gitignore | render (see .pre-commit-hooks.yaml)"
    )
    hook.add_argument("hook_args", nargs=argparse.REMAINDER, metavar="HOOK [FILES...]")
    hook.set_defaults(func=cmd_hook)
    py = sub.add_parser(
        "plugin-yaml", help="print the ConfigManagementPlugin config generated from the parameter table"
    )
    py.set_defaults(func=cmd_plugin_yaml)
    return parser


def _version_action() -> type[argparse.Action]:
    import argparse

    class VersionAction(argparse.Action):
        def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
            super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

        def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
            parser.exit(cmd_version())

    return VersionAction


def cmd_version() -> int:
    """``driftguard-cmp --version``: its own version, then helm's and kustomize's; exit 2 if one is missing."""
    from cmp_plugin import tool_versions
    from driftguard import __version__

    versions = tool_versions.probe(CmpSettings.from_env())
    sys.stdout.write(tool_versions.describe(__version__, versions))
    return EXIT_ERROR if any(v.startswith("missing") for v in versions.values()) else 0


def cmd_generate(
    args: argparse.Namespace | None, *, early: Early | None = None, started: float | None = None
) -> int:
    from cmp_plugin.confine import check_generate_path

    env = AppEnv.from_environ(os.environ)
    settings = CmpSettings.from_env()
    app_dir = Path.cwd()
    check_generate_path(str(app_dir), env.source_path)
    outcome = pipeline.run(
        app_dir,
        repo_root=pipeline.find_repo_root(app_dir, env.source_path),
        env=env,
        settings=settings,
        early=early,
        hot=True,  # Argo CD waits: implicit-defaults' proofs spend about one render's time, then go on next time
        cache=True,  # an unchanged input is served from the render cache (cmp_plugin/render_cache.py)
    )
    from cmp_plugin import baseline

    baseline.remember(env, settings, outcome.kept)  # the shrink guard's baseline of last resort
    if "implicit-defaults-background" in outcome.notes:  # finished once this command has answered
        from cmp_plugin import proof_background

        proof_background.offer(outcome.notes)
        _offered_proof.append(True)
    for warning in outcome.warnings:
        sys.stderr.write(warning.rstrip() + "\n")
    sys.stdout.write(outcome.text)
    if started is not None:
        from cmp_plugin import render_log

        render_log.record(
            os.environ,
            started=started,
            verdict="ok",
            renderer=outcome.renderer,
            resources=len(outcome.keys),
            tools=lambda: _tool_versions(settings),
        )
    return 0


def _tool_versions(settings: CmpSettings | None = None) -> dict[str, str]:
    """The helm and kustomize versions for the render log (cached per binary: cmp_plugin/tool_versions.py)."""
    from cmp_plugin import tool_versions

    return tool_versions.cached(settings if settings is not None else CmpSettings.from_env())


def cmd_discover(args: argparse.Namespace) -> int:
    from cmp_plugin import dirsource

    app_dir = Path.cwd()
    for renderer in RENDERERS.values():
        if renderer.name != "directory" and renderer.detect(app_dir):
            print(renderer.name)
            return 0
    # the files a directory source with the default parameters would read (top level only)
    files, _ = dirsource.select_files(
        app_dir, app_dir, recurse=False, include="", exclude="", max_bytes=CmpSettings().max_output_bytes
    )
    if files:
        print("directory")
    return 0


def cmd_parameters(args: argparse.Namespace) -> int:
    import json

    from cmp_plugin import policy

    env = AppEnv.from_environ(os.environ)
    with contextlib.suppress(GuardRefusal):  # announced as set; generate refuses it with the reason
        env = policy.apply(env, CmpSettings.from_env())
    announcements = [p.announcement(env.params[p.name]) for p in PARAMETERS]
    json.dump(announcements, sys.stdout)
    sys.stdout.write("\n")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    for item in args.set_param:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError("--set-param", f"expected NAME=VALUE, got {item!r}")
        param = by_name(name.strip())
        overrides[param.name] = [v for v in value.split(",") if v] if param.collection == "array" else value
    if args.values_file:
        overrides["values-files"] = list(overrides.get("values-files", [])) + args.values_file
    params, explicit = parse_parameters({}, overrides)
    env = AppEnv(
        app_name=args.app_name or args.path.resolve().name,
        app_namespace=args.namespace,
        project=args.project,
        params=params,
        explicit=explicit,
    )
    outcome = pipeline.run(
        args.path, repo_root=pipeline.find_repo_root(args.path, ""), env=env, settings=CmpSettings.from_env()
    )
    kinds: dict[str, int] = {}
    for key in outcome.keys:
        kinds[key.kind] = kinds.get(key.kind, 0) + 1
    print(
        f"driftguard: {args.path}: {outcome.renderer} rendered {len(outcome.keys)} resource(s); every guard passed"
    )
    for kind, count in sorted(kinds.items()):
        print(f"  {count:5} {kind}")
    for warning in outcome.warnings:
        print(warning.rstrip())
    if args.explain:
        from cmp_plugin.guards import implicit_defaults

        switches = outcome.notes.get(implicit_defaults.NOTE)
        if isinstance(switches, list):
            content_only = outcome.notes.get(implicit_defaults.NOTE + "-content-only")
            for line in implicit_defaults.explain(
                switches, content_only if isinstance(content_only, int) else 0
            ):
                print(line)
        else:
            print("implicit-defaults: not run (not a helm chart, or implicit-defaults=off)")
    if args.output:
        args.output.write_text(outcome.text)
        print(f"manifests written to {args.output}")
    return 0


def cmd_set_image(args: argparse.Namespace) -> int:
    from cmp_plugin.repotools.set_image import parse_spec, set_image

    file, changes = set_image(args.path, parse_spec(args.spec))
    for change in changes:
        print(f"driftguard: {file}: {change}")
    if not changes:
        print(f"driftguard: {file}: {args.spec} is already set; nothing changed")
    return 0


def cmd_hook(args: argparse.Namespace) -> int:
    from cmp_plugin.repotools.hooks import main as hook_main

    return hook_main(list(args.hook_args), render=main)


def cmd_plugin_yaml(args: argparse.Namespace) -> int:
    from cmp_plugin.plugin_yaml import plugin_config_map

    sys.stdout.write(plugin_config_map())
    return 0


def format_failure(exc: BaseException) -> str:
    """The text Argo CD shows in its UI: one headline, at most 30 lines of detail, one fix line."""
    keys: list[str] = []
    if isinstance(exc, GuardRefusal):
        from driftguard import cause  # only on a refusal: generate's happy path stays lean

        head = cause.refusal_headline(exc.guard, exc.reason)
        details, fix = exc.details, exc.fix
        # one line per gating key in the form the notifier quotes as the cause (driftguard/cause.py)
        keys = [cause.gating_line(cause.GatingKey(*g)) for g in exc.gating[: cause.MAX_KEYS]]
    elif isinstance(exc, RenderError):
        head = f"driftguard: error: {exc}"
        details = exc.stderr.splitlines() if exc.stderr else []
        fix = "fix the chart or overlay so that the tool succeeds locally (driftguard-cmp render PATH)"
    elif isinstance(exc, ConfigError):
        head = f"driftguard: error: {exc}"
        details, fix = [], f"set {exc.setting} in the sidecar's environment"
    elif isinstance(exc, DriftguardError):
        head = f"driftguard: error: {exc}"
        details, fix = [], "fix the input named above; `driftguard-cmp render PATH` reproduces it locally"
    else:
        head = f"driftguard: error: {exc}"
        details, fix = [], ""
    lines = [head.replace("\n", " ")]
    # a detail is one indented line: text from a chart or values (a key with a newline) cannot
    # start a line of its own and pose as the headline or a gating key
    shown = [f"  {' '.join(d.splitlines())}" for d in details[:MAX_DETAIL_LINES]]
    if len(details) > MAX_DETAIL_LINES:
        shown[-1] = f"  ... and {len(details) - MAX_DETAIL_LINES + 1} more"
    lines += shown
    lines += keys
    if fix:
        lines.append(f"fix: {' '.join(fix.splitlines())}")
    return "\n".join(lines) + "\n"
