"""`gpusched validate` end to end: exit codes, message format, stdin,
directories, the -o round trip, and every shipped example being valid."""
import json

POD_BAD_GPU = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  containers:
  - name: main
    resources:
      limits: {nvidia.com/gpu: two}
"""


def test_examples_all_valid(run, examples_dir):
    r = run("validate", "-f", str(examples_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""
    assert r.stderr.startswith("validate: ")
    assert r.stderr.split(", ")[-1].startswith("0 invalid")


def test_each_example_file_valid(run, examples_dir):
    files = sorted(examples_dir.glob("*.yaml"))
    assert len(files) >= 6
    for f in files:
        r = run("validate", "-f", str(f))
        assert r.returncode == 0, f"{f}: {r.stdout}"


def test_bad_quantity_message(run, tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text(POD_BAD_GPU)
    r = run("validate", "-f", "job.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith('job.yaml:2: spec.containers[0].resources.limits["nvidia.com/gpu"]: '
                               'invalid quantity "two"')
    assert len(r.stdout.splitlines()) == 1
    assert "1 invalid" in r.stderr


def test_stdin(run):
    r = run("validate", "-f", "-", input=POD_BAD_GPU)
    assert r.returncode == 1
    assert r.stdout.startswith("<stdin>:2: spec.containers[0]")
    ok = run("validate", "-f", "-", input='{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}')
    assert ok.returncode == 0 and ok.stdout == ""


def test_every_problem_reported(run):
    doc = """\
apiVersion: v1
kind: Pod
metadata: {name: Bad_Name, annotations: {gpusched.io/gpu-milli: "0"}}
spec:
  priority: high
  containers:
  - name: c
    resources:
      requests: {cpu: -1}
"""
    r = run("validate", "-f", "-", input=doc)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    paths = [line.split(": ")[1] for line in lines]
    assert paths == ["metadata.name", "spec.containers[0].resources.requests.cpu", "spec.priority",
                     'metadata.annotations["gpusched.io/gpu-milli"]']


def test_syntax_error_names_document_and_line(run, tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\nkind: [Pod\nmetadata: x\n")
    r = run("validate", "-f", str(f))
    assert r.returncode == 1
    assert r.stdout.startswith(f"{f}:2: line ")
    assert " column " in r.stdout


def test_duplicate_key_is_an_error(run):
    r = run("validate", "-f", "-", input="apiVersion: v1\nkind: Node\nkind: Pod\nmetadata: {name: n}\n")
    assert r.returncode == 1
    assert r.stdout == '<stdin>:1: line 3 column 1: duplicate key "kind"\n'


def test_unknown_kind_and_missing_name(run):
    r = run("validate", "-f", "-", input="apiVersion: v1\nkind: Pdo\nmetadata: {}\n")
    assert r.returncode == 1
    assert r.stdout.splitlines() == ['<stdin>:1: kind: unknown kind "Pdo" for apiVersion "v1"',
                                     "<stdin>:1: metadata.name: is required"]


def test_directory_sorted_and_filtered(run, tmp_path):
    (tmp_path / "b.yml").write_text("apiVersion: v1\nkind: Pdo\nmetadata: {name: x}\n")
    (tmp_path / "a.json").write_text('[{"apiVersion":"v1","kind":"Node","metadata":{}}]')
    (tmp_path / "c.txt").write_text("not: [valid")
    (tmp_path / "d.yaml").write_text("# empty file\n")
    r = run("validate", "-f", str(tmp_path))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{tmp_path}/a.json:1: metadata.name")
    assert lines[1].startswith(f"{tmp_path}/b.yml:1: kind:")
    assert len(lines) == 2
    assert "3 files, 2 documents, 2 invalid" in r.stderr


def test_usage_errors(run, tmp_path):
    r = run("validate")
    assert r.returncode == 2 and "no input" in r.stderr
    r = run("validate", "--frobnicate")
    assert r.returncode == 2 and "unknown option" in r.stderr
    r = run("validate", "-f")
    assert r.returncode == 2
    r = run("validate", "-f", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    r = run("validate", "-o", "xml", "-f", "-", input="")
    assert r.returncode == 2
    r = run("validate", "--help")
    assert r.returncode == 0 and "usage: gpusched validate" in r.stdout


def test_round_trip_keeps_unknown_fields(run, tmp_path, examples_dir):
    doc = {"apiVersion": "v1", "kind": "Pod", "futureTop": {"x": [1, 2.5, None, True, "yes"]},
           "metadata": {"name": "p", "annotations": {"note": "0x10"}},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}, "extra": {}}],
                    "unknownSpec": "on"},
           "status": {"phase": "Pending", "big": "123456789012345678901234"}}
    src = tmp_path / "p.json"
    src.write_text(json.dumps(doc))
    r = run("validate", "-f", str(src), "-o", "json")
    assert r.returncode == 0, r.stdout
    assert json.loads(r.stdout)["items"] == [doc]
    r = run("validate", "-f", str(src), "-o", "yaml")
    assert r.returncode == 0
    back = tmp_path / "p.yaml"
    back.write_text(r.stdout)
    r = run("validate", "-f", str(back), "-o", "json")
    assert json.loads(r.stdout)["items"] == [doc]
    # the examples survive YAML -> YAML -> JSON unchanged
    first = run("validate", "-f", str(examples_dir), "-o", "json")
    as_yaml = run("validate", "-f", str(examples_dir), "-o", "yaml")
    (tmp_path / "all.yaml").write_text(as_yaml.stdout)
    second = run("validate", "-f", str(tmp_path / "all.yaml"), "-o", "json")
    assert json.loads(first.stdout) == json.loads(second.stdout)
    assert len(json.loads(first.stdout)["items"]) >= 16


SCHED_BAD = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gang
  plugins:
    score:
      enabled:
      - name: NodeResourcesFit
      - name: Nope
"""


def test_scheduler_config_checked_by_its_parser(run, tmp_path):
    f = tmp_path / "sched.yaml"
    f.write_text(SCHED_BAD)
    r = run("validate", "-f", "sched.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == 'sched.yaml:1: profiles[0].plugins.score.enabled[1].name: unknown plugin "Nope"\n'
    f.write_text(SCHED_BAD.replace("      - name: Nope\n", ""))
    r = run("validate", "-f", "sched.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
