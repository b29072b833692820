"""bench/scale.py --quick: the scale table's shape, not its timings.

The quick mode runs every measurement of the full table (`gpusched bench`
default and --profile gpusched, `gpusched server --bench --only scale
--secure`) on 100 and 300 nodes; the test checks that the printed table has
its columns and one row per size with numbers where numbers belong, that the
growth table names every cost, that the "## Scale" section of a results
file is replaced in place (the sections around it kept), and that the scale
phase refuses bad sizes naming the flag.
"""
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "scale.py"

NUM = re.compile(r"^-?[0-9][0-9,]*(\.[0-9]+)?$")


def rows_of(text, header_start):
    lines = text.splitlines()
    i = next(i for i, l in enumerate(lines) if l.startswith("| " + header_start))
    header = [c.strip() for c in lines[i].strip("|").split("|")]
    assert set(lines[i + 1].replace("|", "").replace("-", "")) == set(), lines[i + 1]
    rows = []
    for l in lines[i + 2:]:
        if not l.startswith("|"):
            break
        rows.append([c.strip() for c in l.strip("|").split("|")])
    return header, rows


def test_quick_table_shape_and_section(tmp_path, gpusched_bin):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Measured results\n\n## Before\n\nkept\n\n## Scale\n\nold table\n\n## After\n\nalso kept\n")
    p = subprocess.run(["/usr/bin/python3", str(SCRIPT), gpusched_bin, "--quick", "--results", str(results),
                        "--dir", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    header, rows = rows_of(p.stdout, "nodes |")
    assert header == ["nodes", "pods stored", "default pods/CPU-s", "gpusched pods/CPU-s", "bytes/node",
                      "bytes/pod", "relist s", "/readyz s", "create to bound pods/s (TLS+auth)", "CPU ms/pod",
                      "p50 / p99 ms", "peak RSS MiB"]
    assert [r[0] for r in rows] == ["100", "300"]
    assert [r[1] for r in rows] == ["1,000", "3,000"]
    for r in rows:
        assert len(r) == len(header), r
        numeric = [r[i] for i in (0, 1, 2, 4, 5, 6, 7, 8, 9, 11)]
        assert all(NUM.match(c) for c in numeric), r
        assert NUM.match(r[3]) or r[3] == "refused", r  # the production profile, once bench has it
        p50, p99 = (c.strip() for c in r[10].split("/"))
        assert NUM.match(p50) and NUM.match(p99), r
        assert float(r[8].replace(",", "")) > 0, r  # every created pod was bound
        assert float(r[5].replace(",", "")) > 0 and float(r[6]) > 0, r
    gheader, grows = rows_of(p.stdout, "cost |")
    assert gheader == ["cost", "at smallest", "at largest", "grows as nodes^k", "k"]
    assert [g[0] for g in grows] == ["CPU us per decision, default profile", "CPU us per decision, gpusched profile",
                                     "server bytes per node", "server bytes per pod", "relist after a restart, s",
                                     "create to bound, CPU ms per pod", "peak RSS, MiB"]
    for g in grows:
        assert g[4] == "-" or re.match(r"^-?[0-9]+\.[0-9]{2}$", g[4]), g
    assert grows[0][4] != "-"  # the default profile is always measured

    text = results.read_text()
    assert text.count("## Scale\n") == 1
    assert "old table" not in text
    assert text.index("## Before") < text.index("## Scale") < text.index("## After")
    assert "kept\n" in text and "also kept\n" in text
    assert "bench/scale.py" in text and "--quick" in text


def test_scale_phase_refuses_bad_sizes(run):
    p = run("server", "--bench", "--only", "scale", "--scale-nodes", "0")
    assert p.returncode == 2
    assert '--scale-nodes "0": want a whole number from 1 to 10000000' in p.stderr
    p = run("server", "--bench", "--only", "scale", "--scale-pods", "12x")
    assert p.returncode == 2
    assert '--scale-pods "12x": want a whole number from 0 to 10000000' in p.stderr
    p = run("server", "--bench", "--only", "everything")
    assert p.returncode == 2
    assert '--only "everything": want api, e2e, rss or scale' in p.stderr
