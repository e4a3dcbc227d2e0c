"""A renamed run's folder moved to its new name (`renamed_from`, engine/plan/moves.py).

The folder is renamed, never copied and never deleted: one ``rename(2)``, so its
outputs, logs and manifest are under one name or the other, never half. A crash after
the rename and before the journal records the move leaves the new folder and no old
one: the next pass finds it so and only records the move. Two applies take turns under
the project's lock, and the second finds nothing left to move.
"""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.errors import PathError
from reconciler.state.provenance import read_manifest, write_manifest


def move_folder(root: Path, old_dir: str, new_dir: str, *, link: bool) -> None:
    """Rename ``old_dir`` to ``new_dir`` (both relative to ``root``, or absolute).
    ``link``: jobs of the old name still queued or running write under the old path,
    which is then left as a link to the new folder. Refused when both exist."""
    old, new = root / old_dir, root / new_dir
    if os.path.lexists(new):
        if os.path.lexists(old) and not old.is_symlink():
            raise PathError(
                f"cannot move {old_dir} to {new_dir} (renamed_from): {new_dir} exists "
                f"already. Move or remove what is in {new_dir} (recon never overwrites a "
                "folder), then apply again"
            )
        return  # moved already: a pass that stopped before the journal said so
    if not os.path.lexists(old):
        return  # the old run made no folder: nothing to carry
    try:
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(old, new)
        if link:
            os.symlink(new.resolve(), old)
    except OSError as error:
        raise PathError(
            f"cannot move {old_dir} to {new_dir} (renamed_from): {error.strerror or error}"
        ) from None


def move_manifest(folder: Path, run: str, old_dir: Path, spec_hash: str) -> None:
    """The manifest in ``folder`` under the run's new name, folder and hash, its outputs'
    paths under the new folder; a folder without a manifest (or one this recon cannot
    read) is left as it is."""
    manifest = read_manifest(folder)
    if manifest is None or manifest.run == run:
        return
    before, after = str(old_dir), str(folder)

    def moved(path: str) -> str:
        return after + path[len(before) :] if path.startswith(before + os.sep) else path

    outputs = {
        name: made.model_copy(update={"path": moved(made.path)})
        for name, made in manifest.outputs.items()
    }
    write_manifest(
        manifest.model_copy(
            update={"run": run, "run_dir": after, "spec_hash": spec_hash, "outputs": outputs}
        ),
        folder,
    )
