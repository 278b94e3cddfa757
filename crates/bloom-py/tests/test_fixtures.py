"""Every golden fixture of format versions 1 to 3 answers through the Python package exactly
as the Rust reader (the `bloom check` command) answers: listed keys, removed keys, keys never
inserted, the empty key and text outside ASCII; loaded from a path and from bytes, one key at
a time and as a batch."""

import json

import pytest

import bloom
from conftest import snapshot_fixtures


def probe_keys(fixture):
    keys = []
    for suffix in (".keys", ".removed"):
        path = fixture.with_suffix(suffix)
        if path.exists():
            keys += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    keys += [f"never-inserted-{i}" for i in range(200)]
    keys += ["", "Cafe\u0301 \u03a3", "CAFÉ  "]
    return keys


def rust_answers(cli, fixture, keys, tmp_path):
    key_file = tmp_path / "keys.jsonl"
    key_file.write_text("".join(json.dumps(k) + "\n" for k in keys), encoding="utf-8")
    out = cli("check", fixture, "--keys", key_file, "--jsonl", "--json").stdout
    answers = [json.loads(line)["answer"] for line in out.decode().splitlines()]
    assert len(answers) == len(keys)
    return [a == "maybe" for a in answers]


def header_fields(fixture):
    fields = {}
    for line in fixture.with_suffix(".header.txt").read_text().splitlines():
        name, _, value = line.partition(": ")
        fields[name] = value
    return fields


@pytest.mark.parametrize("fixture", snapshot_fixtures(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_answers_as_rust(fixture, cli, tmp_path):
    keys = probe_keys(fixture)
    expected = rust_answers(cli, fixture, keys, tmp_path)
    from_path = bloom.load(fixture)
    from_bytes = bloom.loads(fixture.read_bytes())
    assert [k in from_path for k in keys] == expected
    assert from_path.contains_all(keys) == expected
    assert from_bytes.contains_all(iter(keys)) == expected
    # Keys as UTF-8 bytes answer as the same text (every fixture's encoding takes them).
    assert from_path.contains_all([k.encode() for k in keys]) == expected
    # Listed keys are all present: the fixture's own promise.
    listed = fixture.with_suffix(".keys").read_text(encoding="utf-8").splitlines()
    assert all(from_path.contains_all(json.loads(k) for k in listed))

    fields = header_fields(fixture)
    header = bloom.inspect(fixture)
    assert header == bloom.verify(fixture) == bloom.inspect(fixture.read_bytes())
    assert str(header["format_version"]) == fields["format version"]
    assert str(header["bits"]) == fields["bit count (m)"]
    assert str(header["hashes"]) == fields["positions per key (k)"]
    assert str(header["items"]) == fields["item count"]
    assert str(header["dataset_generation"]) == fields["dataset generation"]
    assert from_path.generation == header["dataset_generation"]


@pytest.mark.parametrize("fixture", snapshot_fixtures(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_saved_by_python_is_verified_and_answers_the_same(fixture, cli, tmp_path):
    keys = probe_keys(fixture)
    original = bloom.load(fixture)
    out = tmp_path / "saved.bloom"
    original.save(out, generation=original.generation)
    assert out.read_bytes() == original.to_bytes(original.generation)
    cli("verify", out)
    assert bloom.load(out).contains_all(keys) == original.contains_all(keys)
