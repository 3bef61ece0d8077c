"""Token rows in the Python probe (issue 27): the row map, per-row statistics and their
sidecar, selecting several windows per process, and the bounds. Values are checked against
float64 torch computations of the definitions (docs/manifest.md, "Token rows"), whose rounding
does not depend on the CPU's low-precision kernels."""

import os
import struct

import pytest
import torch

from conftest import all_files, load_manifest, record

ROW_MUL = 2654435761
COL_MUL = 2246822519


def weight(k, multiplier):
    return (((k + 1) * multiplier) % 2 ** 32) / 2 ** 32


def rows_of(path):
    """{(stage, occurrence): [(entry, position, [5 values]), ...]} of a written window."""
    manifest = load_manifest(path)
    t = manifest["token_rows"]
    assert (t["dtype"], t["byteorder"]) == ("float32", "little")
    assert t["stats"] == ["nonfinite_count", "max_abs", "sum", "sum_squares", "row_checksum"]
    with open(os.path.join(os.path.dirname(path), t["file"]), "rb") as handle:
        data = handle.read()
    assert len(data) == t["rows"] * 20 == t["bytes"]
    values = struct.unpack("<%df" % (len(data) // 4), data)
    forward = []
    for index, entry in enumerate(t["map"]):
        positions = entry.get("positions") or range(entry["first_position"], entry["first_position"] + entry["count"])
        forward.extend((index, p) for p in positions)
    by_seq = {r["seq"]: r for r in manifest["records"]}
    out = {}
    for seq, first, count, dims, positions in t["records"]:
        r = by_seq[seq]
        at = positions if positions is not None else forward
        out[(r["stage"], r["occurrence"])] = [
            (at[n][0], at[n][1], list(values[(first + n) * 5:(first + n) * 5 + 5])) for n in range(count)]
    return manifest, out


def expected_row(row, position, cols=None):
    """The five statistics of one token row (a float64 tensor: k matrix rows of ``cols``, all of
    it one matrix row by default) at ``position``, by definition."""
    cols = cols or row.numel()
    finite = torch.isfinite(row.reshape(-1))
    x = torch.where(finite, row.reshape(-1), torch.zeros_like(row.reshape(-1)))
    k = x.numel() // cols
    w = torch.tensor([weight(position * k + i // cols, ROW_MUL) * weight(i % cols, COL_MUL)
                      for i in range(x.numel())], dtype=torch.float64)
    return [float((~finite).sum()), float(x.abs().max()), float(x.sum()), float((x * x).sum()),
            float((x * w).sum())]


def test_each_row_gets_the_five_statistics_at_its_position(probe):
    x = torch.randn(4, 3, 5, dtype=torch.float64)
    x[2, 1, 3] = float("nan")
    assert probe.arm("req", first_position=7) is True
    probe.capture("h", x)
    manifest, rows = rows_of(probe.finish())
    assert manifest["token_rows"]["map"] == [{"request": "req", "first_position": 7, "count": 4}]
    assert manifest["token_rows"]["positions_inferred"] is False
    got = rows[("h", 1)]
    assert [(e, p) for e, p, _ in got] == [(0, 7), (0, 8), (0, 9), (0, 10)]
    for n, (_e, p, values) in enumerate(got):
        want = expected_row(x[n], p, cols=5)  # [3, 5] per token: k = 3 matrix rows of 5
        assert values[0] == want[0]
        assert values[1:] == pytest.approx(want[1:], rel=1e-6, abs=1e-6), (n, values, want)


@pytest.mark.parametrize("shape", [(6, 8), (6, 3, 8), (6,)])
def test_the_row_checksums_of_a_forward_from_position_0_add_up_to_its_pos_checksum(probe, shape):
    x = torch.randn(*shape, dtype=torch.float64)
    probe.arm("req")
    probe.capture("h", x)
    manifest, rows = rows_of(probe.finish())
    total = sum(values[4] for _e, _p, values in rows[("h", 1)])
    whole = record(manifest, "h")["stats"]["pos_checksum"]
    if len(shape) == 1:  # a 1-D record is one matrix row; its token rows are single elements
        whole = sum(weight(p, ROW_MUL) * weight(0, COL_MUL) * float(x[p]) for p in range(6))
    assert total == pytest.approx(whole, rel=1e-6)


def test_positions_are_counted_on_over_calls_that_were_not_captured(make_probe):
    """Chunks of 5, 4 and 3 rows: the third call, alone captured, starts at position 9; each
    uncaptured call counted its rows at its first capture, from a shape only."""
    probe = make_probe(DUMP_PROBE_OCCURRENCE="3")
    path = None
    for n in (5, 4, 3):
        probe.arm("req")
        probe.capture("h", torch.ones(n, 2))
        probe.capture("scores", torch.ones(2, n, 9))  # not the forward's rows: no token rows
        path = probe.finish() or path
    manifest, rows = rows_of(path)
    assert manifest["token_rows"]["map"] == [{"request": "req", "first_position": 9, "count": 3}]
    assert manifest["token_rows"]["positions_inferred"] is True
    assert [p for _e, p, _ in rows[("h", 1)]] == [9, 10, 11]
    assert ("scores", 1) not in rows


def test_occurrence_all_and_ranges_write_a_window_per_call(make_probe, dump_dir):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="2-3")
    written = []
    for n in (5, 4, 3, 1):
        probe.arm("req")
        probe.capture("h", torch.ones(n, 2))
        written.append(probe.finish())
    assert written[0] is None and written[3] is None
    assert [load_manifest(p)["occurrence"] for p in written[1:3]] == [2, 3]
    assert [load_manifest(p)["token_rows"]["map"][0]["first_position"] for p in written[1:3]] == [5, 9]
    probe = make_probe(DUMP_PROBE_OCCURRENCE="all", DUMP_PROBE_DIR=dump_dir + "-all")
    for n in (5, 4):
        probe.arm("req")
        probe.capture("h", torch.ones(n, 2))
        assert probe.finish() is not None


@pytest.mark.parametrize("text", ["0", "3-2", "a-b", "2-", "some"])
def test_a_bad_occurrence_disarms_with_its_name(make_probe, capsys, text):
    probe = make_probe(DUMP_PROBE_OCCURRENCE=text)
    assert probe.arm("req") is False
    assert "DUMP_PROBE_OCCURRENCE=%r must be a positive integer, a range like 2-5, or 'all'" % text.lower() \
        in capsys.readouterr().err


def test_a_batched_forward_with_padding_and_the_request_selection(make_probe):
    """The row map in the engine's row order: r1's 2 rows, r0's 3, 1 padding row. Only the
    forwards holding r0 are captured (DUMP_PROBE_REQUEST)."""
    probe = make_probe(DUMP_PROBE_REQUEST="r0", DUMP_PROBE_OCCURRENCE="all")
    assert probe.arm("r1", rows=[("r1", 0, 4)]) is False  # r1 alone: not selected
    probe.capture("h", torch.ones(4, 2))
    probe.finish()
    x = torch.arange(12.0, dtype=torch.float64).reshape(6, 2)
    assert probe.arm("r1", rows=[("r1", 4, 2, [7, 8]), ("r0", 0, 3, [1, 2, 3]), (None, 0, 1)]) is True
    probe.capture("h", x)
    probe.capture("k_cache_read", torch.ones(5, 2), positions=[("r1", p) for p in range(5)])
    manifest, rows = rows_of(probe.finish())
    t = manifest["token_rows"]
    assert t["map"] == [
        {"request": "r1", "first_position": 4, "count": 2, "token_ids": [7, 8]},
        {"request": "r0", "first_position": 0, "count": 3, "token_ids": [1, 2, 3]},
        {"request": None, "first_position": 0, "count": 1},
    ]
    assert [(e, p) for e, p, _ in rows[("h", 1)]] == [(0, 4), (0, 5), (1, 0), (1, 1), (1, 2), (2, 0)]
    padding = rows[("h", 1)][5][2]
    assert padding[4] == 0.0  # padding rows weigh 0 in the checksum
    assert [(e, p) for e, p, _ in rows[("k_cache_read", 1)]] == [(0, p) for p in range(5)]


def test_declared_rows_that_do_not_fit_warn_and_leave_the_record_whole(probe, capsys):
    probe.arm("req", rows=[("req", 0, 4)])
    probe.capture("h", torch.ones(4, 2))
    probe.capture("wrong", torch.ones(3, 2), rows="tokens")
    probe.capture("none", torch.ones(4, 2), rows=None)
    probe.capture("bsh", torch.ones(2, 2, 8), rows="tokens", token_dims=(0, 1))
    manifest, rows = rows_of(probe.finish())
    assert sorted(k[0] for k in rows) == ["bsh", "h"]
    assert len(rows[("bsh", 1)]) == 4
    assert "capture('wrong', rows='tokens'): 3 rows but the forward holds 4" in capsys.readouterr().err
    assert {r["stage"] for r in manifest["records"]} == {"h", "wrong", "none", "bsh"}


def test_a_malformed_row_map_warns_and_the_window_is_written_without_rows(probe, capsys):
    assert probe.arm("req", rows=[("req", -1, 3)]) is True
    probe.capture("h", torch.ones(3, 2))
    path = probe.finish()
    assert "token_rows" not in load_manifest(path)
    assert "is not a list of (request, first_position, count)" in capsys.readouterr().err
    assert all_files(os.path.dirname(path)) == ["manifest.json"]


def test_row_statistics_can_be_off_or_bounded(make_probe, dump_dir):
    probe = make_probe(DUMP_PROBE_ROW_STATS="off")
    probe.arm("req")
    probe.capture("h", torch.ones(3, 2))
    path = probe.finish()
    assert load_manifest(path)["token_rows"]["file"] is None
    assert all_files(os.path.dirname(path)) == ["manifest.json"]

    probe = make_probe(DUMP_PROBE_ROW_STATS="^keep", DUMP_PROBE_ROW_POSITIONS="2-3",
                       DUMP_PROBE_DIR=dump_dir + "-bounded")
    probe.arm("req")
    probe.capture("keep.h", torch.ones(5, 2))
    probe.capture("other", torch.ones(5, 2))
    manifest, rows = rows_of(probe.finish())
    assert list(rows) == [("keep.h", 1)]
    assert [(e, p) for e, p, _ in rows[("keep.h", 1)]] == [(0, 2), (0, 3)]
    assert manifest["token_rows"]["row_positions"] == [2, 3]
    assert manifest["token_rows"]["stage_filter"] == "^keep"


def test_the_disarmed_path_is_one_boolean(make_probe):
    probe = make_probe(DUMP_PROBE=None)
    assert probe.arm("req") is False
    assert probe._active is False and probe._counting is False
    probe.capture("h", torch.ones(3, 2))
    assert probe._state.positions == {}


def test_inputs_that_used_to_pass_silently_warn(make_probe, capsys):
    """A negative first_position, a token_dims the probe does not read, and a declared row
    count no capture matches each say so once; plain positions in a forward with padding go to
    its one request, wherever its entry is."""
    probe = make_probe(DUMP_PROBE_OCCURRENCE="all")
    assert probe.arm("req", first_position=-2) is True
    probe.capture("h", torch.ones(3, 2))
    path = probe.finish()
    assert "token_rows" not in load_manifest(path)
    assert "first_position=-2 is negative" in capsys.readouterr().err

    probe.arm("req", first_position=0)
    probe.capture("h", torch.ones(3, 2), token_dims=(5,))
    assert "token_rows" not in load_manifest(probe.finish())
    assert "capture('h', token_dims=(5,)): token dims are (0,) or (0, 1)" in capsys.readouterr().err

    probe.arm("req", first_position=0)
    probe.capture("s", torch.ones(3, 2), token_dims="01")  # a string is not a tuple of dims
    assert "token_rows" not in load_manifest(probe.finish())
    assert "capture('s', token_dims='01'): token dims are (0,) or (0, 1)" in capsys.readouterr().err

    probe.arm("req", rows=[("r0", 0, 2), ("r1", 0, 2)])
    probe.capture("h4", torch.ones(4, 2))  # the forward's 4 rows
    probe.capture("kv2", torch.ones(3, 2), positions=[0, 1])  # 2 positions for 3 rows
    assert "capture('kv2', positions=...): 2 positions for 3 rows" in capsys.readouterr().err
    probe.capture("kv3", torch.ones(2, 2), positions=[0, 1])  # plain positions, two requests
    assert "plain positions need a forward of one request (this one's row map holds 2)" \
        in capsys.readouterr().err
    probe.capture("kv4", torch.ones(2, 2), positions=[("r9", 0), ("r0", 1)])
    assert "request 'r9' is not in the forward's row map" in capsys.readouterr().err
    probe.finish()
    assert capsys.readouterr().err == ""

    probe.arm("req", rows=[("r0", 0, 3), ("r1", 0, 2)])
    probe.capture("flat", torch.ones(10, 2))  # 10 rows: a padded batch declared as its 5 tokens
    path = probe.finish()
    assert "arm('req', rows=...) declares 5 rows, but no capture of that forward had 5 rows" \
        in capsys.readouterr().err

    probe.arm("req", rows=[("r0", -1, 3)])  # a second row-map problem, another label's: said too
    probe.finish()
    assert "negative position or count" in capsys.readouterr().err
    probe.arm("req", rows=[("r0", 0, 3, [1, 2])])
    probe.finish()
    assert "2 token ids for 3 rows" in capsys.readouterr().err

    probe.arm("req", rows=[(None, 0, 1), ("r0", 0, 2)])
    probe.capture("neg", torch.ones(2, 2), positions=[-1, 0])
    assert "capture('neg', positions=...): a negative position" in capsys.readouterr().err
    probe.capture("h", torch.ones(3, 2))
    probe.capture("kv", torch.ones(4, 2), positions=range(4))
    _manifest, rows = rows_of(probe.finish())
    assert [(e, p) for e, p, _ in rows[("kv", 1)]] == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert capsys.readouterr().err == ""


def test_padding_rows_alone_do_not_make_a_forward_differ(make_probe, dump_dir, dumpview):
    """The same request captured alone and padded to a graph's batch size (two padding rows):
    the forwards pair whole by their rows, and the records' shapes, which differ only by the
    padding, are decided by the rows: dumpview finds nothing (exit 0)."""
    import subprocess
    torch.manual_seed(0)
    weight, table = torch.randn(16, 16) / 4, torch.randn(100, 16)
    ids = [5, 17, 42, 8, 99, 3]
    out = {}
    for name, pad in (("whole", 0), ("padded", 2)):
        probe = make_probe(DUMP_PROBE_DIR=dump_dir + "-" + name)
        rows = [("req", 0, len(ids), ids)] + ([(None, 0, pad)] if pad else [])
        probe.arm("req", rows=rows)
        h = torch.cat([table[torch.tensor(ids)], torch.zeros(pad, 16)])
        probe.capture("embed", h)
        probe.capture("q", h @ weight)
        out[name] = os.path.dirname(os.path.dirname(os.path.dirname(probe.finish())))
    done = subprocess.run([dumpview, "diff", out["whole"], out["padded"]], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every paired record agrees" in done.stdout, done.stdout
    assert "structural" not in done.stdout, done.stdout


def test_per_request_state_is_keyed_by_each_request_s_last_position(probe, capsys):
    """rows="requests": one row per request of the map, at its last position in the forward,
    so a chunked run's state after its last chunk pairs with the unchunked run's."""
    probe.arm("batch", rows=[("r0", 3, 2), (None, 0, 1), ("r1", 0, 4)])
    probe.capture("h", torch.ones(7, 2))
    state = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    probe.capture("ssm_state", state, rows="requests")
    probe.capture("bad_state", torch.ones(3, 2), rows="requests")  # 3 rows, 2 requests
    assert "capture('bad_state', rows='requests'): 3 rows, but the forward's row map holds 2 requests" \
        in capsys.readouterr().err
    _manifest, rows = rows_of(probe.finish())
    got = rows[("ssm_state", 1)]
    # Entries 0 and 2 (r0 and r1), at positions 3 + 2 - 1 and 0 + 4 - 1.
    assert [(e, p) for e, p, _ in got] == [(0, 4), (2, 3)]
    assert got[0][2][:4] == [0.0, 2.0, 3.0, 5.0]  # nonfinite, max_abs, sum, sum of squares
    assert ("bad_state", 1) not in rows


def test_per_request_state_pairs_across_chunking_in_dumpview(make_probe, dump_dir, dumpview):
    """A recurrent state captured with rows="requests": the state after a chunked run's last
    chunk is compared with the unchunked run's (both at the request's last position, 5);
    a chunk that drops the carried state is found there, by dumpview, at position 5."""
    import json
    import subprocess
    torch.manual_seed(0)
    table = torch.randn(50, 8, dtype=torch.float64)
    ids = [3, 14, 15, 9, 26, 5]
    out = {}
    for name, chunks, carry in (("whole", [6], True), ("chunked", [3, 3], True), ("dropped", [3, 3], False)):
        probe = make_probe(DUMP_PROBE_DIR=dump_dir + "-" + name, DUMP_PROBE_OCCURRENCE="all")
        state, start = torch.zeros(1, 8, dtype=torch.float64), 0
        for n in chunks:
            probe.arm("req", rows=[("req", start, n, ids[start:start + n])])
            x = table[torch.tensor(ids[start:start + n])]
            probe.capture("x", x)
            if not carry and start:
                state = torch.zeros(1, 8, dtype=torch.float64)  # the bug: the state is not carried over
            for t in range(n):
                state = 0.5 * state + x[t:t + 1]
            probe.capture("state", state, rows="requests")
            probe.finish()
            start += n
        out[name] = dump_dir + "-" + name
    good = subprocess.run([dumpview, "diff", "--json", out["whole"], out["chunked"]], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    tokens = json.loads(good.stdout)["diff"]["tokens"]
    # x: 6 rows; state: the whole run's one row at position 5 against the chunked run's last.
    assert tokens["rows_compared"] == 7, tokens
    bad = subprocess.run([dumpview, "diff", "--json", out["whole"], out["dropped"]], capture_output=True, text=True)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    first = json.loads(bad.stdout)["diff"]["tokens"]["first"]
    assert (first["key"], first["position"], first["token_id"]) == ("state#1", 5, 5), first


def test_rows_left_out_by_the_position_bound_never_clear_a_whole_tensor_finding(make_probe, dump_dir, dumpview):
    """B swaps the rows at positions 3 and 4 of one stage and keeps only positions 0-2's row
    statistics (DUMP_PROBE_ROW_POSITIONS=0-2): the three rows compared agree, but they are not
    the whole tensor, so the whole tensor's VALUES MOVED stands (exit 1); with every row kept
    the rows name the permutation."""
    import subprocess
    torch.manual_seed(0)
    table, weight = torch.randn(100, 16, dtype=torch.float64), torch.randn(16, 16, dtype=torch.float64) / 4
    ids = [3, 14, 15, 92, 65]
    out = {}
    for name, env in (("a", {}), ("b_cut", {"DUMP_PROBE_ROW_POSITIONS": "0-2"}), ("b_all", {})):
        probe = make_probe(DUMP_PROBE_DIR=dump_dir + "-" + name, **env)
        probe.arm("req", rows=[("req", 0, 5, ids)])
        h = torch.tanh(table[torch.tensor(ids)] @ weight)
        if name != "a":
            h = h[torch.tensor([0, 1, 2, 4, 3])]
        probe.capture("layers.0.out", h)
        out[name] = os.path.dirname(os.path.dirname(os.path.dirname(probe.finish())))
    cut = subprocess.run([dumpview, "diff", out["a"], out["b_cut"]], capture_output=True, text=True)
    assert cut.returncode == 1, cut.stdout + cut.stderr
    assert "VALUES MOVED" in cut.stdout, cut.stdout
    every = subprocess.run([dumpview, "diff", out["a"], out["b_all"]], capture_output=True, text=True)
    assert every.returncode == 1, every.stdout
    assert "rows_permuted" in every.stdout and "position 3" in every.stdout, every.stdout


def test_the_same_requests_batched_in_another_order_are_the_same_input(make_probe, dump_dir, dumpview):
    """A batches r1 then r2, B r2 then r1, with the same values: the same input (each request's
    ids compared, not the flattened batch), nothing diverges, exit 0."""
    import subprocess
    torch.manual_seed(0)
    table, weight = torch.randn(100, 16, dtype=torch.float64), torch.randn(16, 16, dtype=torch.float64) / 4
    ids1, ids2 = [3, 14, 15], [92, 65]
    out = {}
    for name, order in (("a", (("r1", ids1), ("r2", ids2))), ("b", (("r2", ids2), ("r1", ids1)))):
        probe = make_probe(DUMP_PROBE_DIR=dump_dir + "-" + name)
        probe.arm("step", rows=[(r, 0, len(ids), ids) for r, ids in order])
        x = torch.cat([table[torch.tensor(ids)] for _, ids in order])
        probe.capture("embed", x)
        probe.capture("layers.0.out", torch.tanh(x @ weight))
        out[name] = os.path.dirname(os.path.dirname(os.path.dirname(probe.finish())))
    done = subprocess.run([dumpview, "diff", out["a"], out["b"]], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "same input: 5 token ids equal" in done.stdout, done.stdout
