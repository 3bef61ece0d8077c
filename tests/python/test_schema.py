"""The JSON Schema (assets/manifest.schema.json) matches what the probe writes.

Every committed example manifest validates, a fresh manifest written by the
probe on odd tensors validates, and the schema rejects what docs/manifest.md
forbids (NaN tokens, a tensor path escaping the window, a wrong version).
"""

import json
import math
import pathlib

import jsonschema
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "assets" / "manifest.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
EXAMPLES = sorted((ROOT / "assets" / "examples").rglob("manifest.json"))


def strict_load(path):
    """json.load that refuses NaN/Infinity tokens, as the format requires."""

    def refuse(token):
        raise ValueError("%s: non-strict JSON token %s" % (path, token))

    return json.loads(pathlib.Path(path).read_text(), parse_constant=refuse)


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_there_are_example_manifests():
    assert len(EXAMPLES) >= 10, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "assets" / "examples")))
def test_example_manifest_validates(path):
    manifest = strict_load(path)
    errors = sorted(VALIDATOR.iter_errors(manifest), key=lambda e: list(e.path))
    assert not errors, "\n".join("%s: %s" % (list(e.path), e.message) for e in errors[:5])


def test_fresh_manifest_with_odd_tensors_validates(probe, tmp_path):
    import torch

    probe.arm("req", token_ids=torch.tensor([3, 1, 4]), temperature=0.0)
    x = torch.randn(4, 6)
    x[0, 0] = math.nan
    x[1, 1] = math.inf
    probe.capture("floats", x)
    probe.capture("all_nan", torch.full((3,), math.nan))
    probe.capture("ints", torch.arange(5))
    probe.capture("bools", torch.ones(2, dtype=torch.bool))
    probe.capture("empty", torch.empty(0, 3))
    probe.capture("scalar", torch.tensor(2.5))
    probe.capture("view", x.t()[1:, ::2])
    probe.capture_inputs("op", a=x[:, 1:3], n=3, f=0.5, flag=True, none=None, dt=torch.float16, seq=[1, (2, 3)], d={"k": 1})
    path = probe.finish()
    manifest = strict_load(path)
    VALIDATOR.validate(manifest)
    assert [r["stage"] for r in manifest["records"]] == ["floats", "all_nan", "ints", "bools", "empty", "scalar", "view"]


def test_schema_rejects_what_the_format_forbids():
    manifest = strict_load(EXAMPLES[0])
    record = manifest["records"][0]

    def invalid(mutate):
        copy = json.loads(json.dumps(manifest))
        mutate(copy)
        return not VALIDATOR.is_valid(copy)

    assert invalid(lambda m: m.update(schema_version=2))
    assert invalid(lambda m: m["records"][0].update(mode="lazy"))
    assert invalid(lambda m: m["records"][0].update(tensor_file="../../etc/passwd", rows_kept=1, rows_total=1, truncated=False))
    assert invalid(lambda m: m["records"][0].update(tensor_file="/etc/passwd", rows_kept=1, rows_total=1, truncated=False))
    assert invalid(lambda m: m["records"][0]["stats"].update(mean="big") if record["stats"] else m.update(rank=-1))
    assert invalid(lambda m: m["records"][0].pop("stride"))
    assert invalid(lambda m: m["records"][0].update(tensor_file="tensors/x.safetensors"))  # rows_* missing
