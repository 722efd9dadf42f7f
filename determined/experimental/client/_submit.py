"""Submitting an experiment, with one set of rules for the client SDK (`Determined.create_experiment`), the CLI
(`det experiment create`, through determined/experimental/_run.py) and the search runners: the config is validated
(merged over its template's), the model dir staged (`staged_model_dir`) and packed, and POST /experiments creates it.
"""
import contextlib
import os
import pathlib
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from determined.experimental._connect import Connection
from determined.experimental.client._common import UsageError

PathLike = Union[str, "os.PathLike[str]"]


@contextlib.contextmanager
def staged_model_dir(model_dir: Optional[PathLike],
                     includes: Optional[Sequence[PathLike]] = None) -> Iterator[str]:
    """The directory whose packing (determined.common.context.pack_model_dir) is an experiment's context.

    The rules are Determined's, as `det experiment create` packed a context dir:
      - the files of the model dir, less those its `.detignore` names (gitignore-style patterns) and `__pycache__`,
        `*.pyc`;
      - each of `includes` at the top of the context, under its own name: a file as it is, a directory with its
        files less those its own `.detignore` names;
      - a symbolic link to a file inside the same directory is included by its content; a link that leads out of
        it is refused (ContextError naming it: the context may be read by every user of the master, so a link to
        `~/.aws/credentials` must not upload it; list such a file in `includes` instead); a symbolic link to a
        directory is not followed, and is left out;
      - with no model dir (None), the context holds only the includes (a config whose entrypoint is a command may
        need no code).
    When that is the model dir as it is (no includes, no symbolic links), the model dir itself is used; otherwise a
    temporary copy, removed when the block ends. UsageError for a model dir that is not a directory, an include
    that does not exist or two entries of the same name; ContextError for a link to nothing.
    """
    from determined.common import context as det_context

    if model_dir is not None and not os.path.isdir(model_dir):
        raise UsageError(f"model_dir {str(model_dir)!r} is not a directory")
    if includes is not None and (isinstance(includes, (str, bytes)) or
                                 not all(isinstance(p, (str, os.PathLike)) for p in includes)):
        raise UsageError("includes must be a list of paths")
    files = det_context.list_context_files(str(model_dir)) if model_dir is not None else []
    if model_dir is not None and not includes and not any(path.is_symlink() for _, path in files):
        yield str(model_dir)
        return
    staging = pathlib.Path(tempfile.mkdtemp(prefix="det-context-"))
    try:
        _copy_files(files, staging, model_dir)
        taken = {rel.split("/", 1)[0] for rel, _ in files}
        for include in includes or []:
            source = pathlib.Path(include)
            if not source.exists():
                raise UsageError(f"includes: {str(include)!r} does not exist")
            name = source.resolve().name
            if name in taken or (staging / name).exists():
                raise UsageError(f"includes: {source.name!r} is already in the model directory (or included twice)")
            taken.add(name)
            if source.is_dir():
                _copy_files([(f"{name}/{rel}", path) for rel, path in det_context.list_context_files(str(source))],
                            staging, source)
            else:
                _copy_files([(name, source)], staging, None)
        yield str(staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_files(files: List[Tuple[str, pathlib.Path]], root: pathlib.Path, within: Optional[PathLike]) -> None:
    """Copy each (relative name, path) under `root`, a link by the content it points to; a link must stay inside
    the directory `within` (None: an include named by the user, taken as it is)."""
    from determined.common.context import ContextError

    inside = pathlib.Path(within).resolve() if within is not None else None
    for rel, path in files:
        if not path.exists():
            raise ContextError(f"{str(path)!r} is a symbolic link to {os.readlink(path)!r}, which does not exist; "
                               "remove it or list it in a .detignore file")
        if inside is not None and path.is_symlink() and not path.resolve().is_relative_to(inside):
            raise ContextError(f"{rel!r}: a symbolic link to {os.readlink(path)!r}, outside the model directory; "
                               "copy the file into the directory, or name it in `includes` to upload it")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def validate_config(config: Dict[str, Any], template_config: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The canonical config of `config` merged over `template_config` (a template's config), or
    InvalidExperimentConfig listing every problem; nothing is stored either way."""
    from determined import config as det_config
    from determined.config.overrides import merge_template

    return det_config.load_experiment_config(merge_template(config, template_config)
                                             if template_config is not None else config)


def experiment_body(config: Dict[str, Any], model_dir: Optional[PathLike], *,
                    includes: Optional[Sequence[PathLike]] = None, template: Optional[str] = None,
                    template_config: Optional[Dict[str, Any]] = None, project_id: Optional[int] = None,
                    activate: bool = True, staged: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """The body of POST /experiments: `config` validated (merged over `template_config`, the config of the template
    `template`, which the master merges itself), the entrypoint checked against the model dir (unless the Native API
    runs a command), and the model dir staged (`staged_model_dir`) and packed. `staged(dir)` is called with the
    staged directory before it is packed."""
    from determined.common import context as det_context

    canonical = validate_config(config, template_config)
    body: Dict[str, Any] = {"config": config, "activate": bool(activate)}
    if template is not None:
        body["template"] = template
    if project_id is not None:
        body["project_id"] = project_id
    with staged_model_dir(model_dir, includes) as context:
        if not (canonical.get("internal") or {}).get("native"):
            det_context.check_entrypoint(context, canonical.get("entrypoint"))
        if staged is not None:
            staged(context)
        body["model_definition"] = det_context.pack_model_dir_b64(context)
    return body


def post_experiment(session: Any, body: Dict[str, Any]) -> Dict[str, Any]:
    """Create the experiment of `body` (see `experiment_body`); its JSON."""
    return session.post("/experiments", body)["experiment"]  # type: ignore[no-any-return]


def submit_experiment(to: Any, config: Dict[str, Any], model_dir: Optional[PathLike] = None, *,
                      includes: Optional[Sequence[PathLike]] = None, template: Optional[str] = None,
                      template_config: Optional[Dict[str, Any]] = None, project_id: Optional[int] = None,
                      activate: bool = True) -> Dict[str, Any]:
    """Create an experiment from `config` (a dict) and the code of `model_dir` plus `includes`; the created
    experiment's JSON. Nothing is sent for a config that cannot run or a model dir that cannot be packed.

    `to`: a Connection (an activated experiment goes to its `for_work()`: with no master running on the data dir,
    this process becomes it) or a session. `template`: a config template stored on the master, merged under
    `config` (its config is fetched unless `template_config` gives it).
    """
    if template is not None and template_config is None:
        from determined.experimental.client._template import Templates

        template_config = Templates(to).get_template(template).config
    body = experiment_body(config, model_dir, includes=includes, template=template, template_config=template_config,
                           project_id=project_id, activate=activate)
    if isinstance(to, Connection):
        to = to.for_work() if activate else to.session
    return post_experiment(to, body)
