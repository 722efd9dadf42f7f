"""A symbolic link inside a storage root (one a trial could plant: it may create entries there) is refused in a
checkpoint_storage path even when it resolves inside the root; a link above a root is fine (issue 33)."""
import os
import pathlib

from determined.master.storage import storage_roots


def test_a_link_inside_a_root_is_refused_a_link_above_it_is_not(tmp_path: pathlib.Path) -> None:
    data, root = tmp_path / "data", tmp_path / "roots" / "ckpt"
    (root / "alice").mkdir(parents=True)
    data.mkdir()
    roots = storage_roots.resolve_roots([str(root)], data)
    os.symlink(root / "alice", root / "planted")  # resolves inside the root: to alice's directory
    [problem] = storage_roots.storage_problems({"type": "shared_fs", "host_path": str(root), "storage_path": "planted"},
                                               roots, data)
    assert f"passes through {root / 'planted'}, a symbolic link inside a storage root" in problem
    assert f"give the real directory, {root / 'alice'}" in problem
    deeper = root / "alice" / "sub"
    deeper.mkdir()
    os.symlink(deeper, root / "alice" / "link")
    assert storage_roots.storage_problems({"type": "directory", "container_path": str(root / "alice" / "link")},
                                          roots, data)
    os.symlink(root, tmp_path / "above")  # the admin's link to the root: fine
    assert storage_roots.storage_problems({"type": "shared_fs", "host_path": str(tmp_path / "above"),
                                           "storage_path": "alice"}, roots, data) == []
    assert storage_roots.storage_problems({"type": "shared_fs", "host_path": str(root / "alice")}, roots, data) == []
