"""`gpusched image import|ls|rm`: the node's image store from the command line.

The busybox test image is built here with scripts/make-test-image.sh (Debian's
busybox-static); the tests import it as a tar and as a directory, list it,
find its unpacked root file system where the agent will look for it
(<state dir>/images), remove it, and check that every bad input is refused
with a message naming what is wrong and a non-zero exit.
"""
import json
import pathlib
import subprocess
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAKE_IMAGE = ROOT / "scripts" / "make-test-image.sh"


def build_image(out, ref=None):
    cmd = ["bash", str(MAKE_IMAGE), str(out)] + ([ref] if ref else [])
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    digest = res.stdout.strip()
    assert digest.startswith("sha256:") and len(digest) == 71
    return digest


@pytest.fixture
def image_tar(tmp_path):
    tar = tmp_path / "busybox.tar"
    return tar, build_image(tar)


def ls_rows(run, *flags):
    res = run("image", "ls", *flags)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["REFERENCE", "DIGEST", "SIZE", "UNPACKED"]
    return [line.split() for line in lines[1:]]


def test_import_ls_rm_with_store(run, tmp_path, image_tar):
    tar, digest = image_tar
    store = tmp_path / "store"
    res = run("image", "import", str(tar), "--store", str(store))
    assert res.returncode == 0, res.stderr
    assert "imported 1 image" in res.stdout
    assert (store / "oci-layout").exists()
    index = json.loads((store / "index.json").read_text())
    assert [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]] == [
        "docker.io/library/busybox:latest"]
    assert index["manifests"][0]["digest"] == digest

    rows = ls_rows(run, "--store", str(store))
    assert len(rows) == 1
    assert rows[0][0] == "docker.io/library/busybox:latest"
    assert digest.startswith(rows[0][1])
    assert rows[0][-1] == "no"

    res = run("image", "rm", "busybox", "--store", str(store))
    assert res.returncode == 0, res.stderr
    assert ls_rows(run, "--store", str(store)) == []
    assert list((store / "blobs" / "sha256").iterdir()) == []


def test_state_dir_is_the_agents(run, tmp_path, image_tar):
    """--state-dir / --data-dir name the agent's state dir; the store is DIR/images,
    and the default is ./gpusched-data/agent/NODE/images."""
    tar, _ = image_tar
    state = tmp_path / "agent-state"
    res = run("image", "--data-dir", str(state), "import", str(tar))
    assert res.returncode == 0, res.stderr
    assert (state / "images" / "index.json").exists()
    assert len(ls_rows(run, "--state-dir", str(state))) == 1

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    res = run("image", "import", str(tar), "--node-name", "gpu-7", cwd=str(cwd))
    assert res.returncode == 0, res.stderr
    assert (cwd / "gpusched-data" / "agent" / "gpu-7" / "images" / "index.json").exists()


def test_import_directory_and_two_names(run, tmp_path, image_tar):
    tar, digest = image_tar
    tar2 = tmp_path / "tools.tar"
    assert build_image(tar2, "registry.local:5000/tools/bb:v2") == digest
    layout = tmp_path / "layout"
    layout.mkdir()
    with tarfile.open(tar2) as t:
        t.extractall(layout)
    store = tmp_path / "s"
    assert run("image", "import", str(tar), "--store", str(store)).returncode == 0
    res = run("image", "import", str(layout), "--store", str(store))
    assert res.returncode == 0, res.stderr
    refs = sorted(r[0] for r in ls_rows(run, "--store", str(store)))
    assert refs == ["docker.io/library/busybox:latest", "registry.local:5000/tools/bb:v2"]
    # Removing by digest drops every name of that manifest.
    res = run("image", "rm", digest, "--store", str(store))
    assert res.returncode == 0, res.stderr
    assert ls_rows(run, "--store", str(store)) == []


def test_errors_are_clear(run, tmp_path, image_tar):
    tar, _ = image_tar
    store = tmp_path / "store"
    cases = [
        (("image",), 2, "usage: gpusched image import"),
        (("image", "push", "x"), 2, 'unknown subcommand "push"'),
        (("image", "import", "--store", str(store)), 2, "want one FILE.tar|DIR"),
        (("image", "rm", "--store", str(store)), 2, "want one REF"),
        (("image", "ls", "extra", "--store", str(store)), 2, 'unexpected argument "extra"'),
        (("image", "ls", "--bogus"), 2, 'unknown flag "--bogus"'),
        (("image", "ls", "--store"), 2, "--store needs a value"),
        (("image", "ls", "--store", "a", "--state-dir", "b"), 2, "not both"),
        (("image", "import", str(tmp_path / "missing.tar"), "--store", str(store)), 1,
         "missing.tar: No such file or directory"),
        (("image", "import", str(tmp_path), "--store", str(store)), 1,
         "is not an OCI image layout: it has no oci-layout file"),
        (("image", "rm", "busybox", "--store", str(store)), 1,
         'image "busybox" is not in the node\'s image store'),
        (("image", "rm", "Not/A/Ref", "--store", str(store)), 1, 'repository part "Not" must be lowercase'),
    ]
    for args, code, want in cases:
        res = run(*args)
        assert res.returncode == code, (args, res.returncode, res.stderr)
        assert want in res.stderr, (args, res.stderr)

    # A layout whose blob was tampered with is refused, and nothing is imported.
    layout = tmp_path / "tampered"
    layout.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(layout)
    blobs = sorted((layout / "blobs" / "sha256").iterdir(), key=lambda p: p.stat().st_size)
    biggest = blobs[-1]  # the layer
    data = bytearray(biggest.read_bytes())
    data[100] ^= 0xFF
    biggest.write_bytes(bytes(data))
    res = run("image", "import", str(layout), "--store", str(store))
    assert res.returncode == 1
    assert f"blob sha256:{biggest.name} has digest sha256:" in res.stderr
    assert "the content does not match" in res.stderr
    assert ls_rows(run, "--store", str(store)) == []

    # A tar with an entry that leaves the layout is refused, naming the entry.
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as t:
        info = tarfile.TarInfo("../outside")
        info.size = 0
        t.addfile(info)
    res = run("image", "import", str(evil), "--store", str(store))
    assert res.returncode == 1
    assert 'entry "../outside" points outside the image layout' in res.stderr
    assert not (tmp_path / "outside").exists() and not (store / "outside").exists()


def test_help(run):
    res = run("image", "--help")
    assert res.returncode == 0
    assert "--state-dir DIR" in res.stdout and "--store DIR" in res.stdout
    res = run("--help")
    assert "image" in res.stdout + res.stderr
