//! The findings from one run and the moved writes of the diff, as diagnosis findings: a
//! duplicate shard points at the loader of its stage's weights, a silent rank at the dispatch
//! before it, a stale output at the buffer or graph replay, a moved write at its writer and
//! its address.

use crate::model::analysis::layout_diff::MovedWrite;
use crate::model::analysis::single_run::{self, Kind};

use super::context::{Context, cite, layout_words, record};
use super::types::{Address, Cite, Claim, Finding, Role, Rule};

/// One diagnosis finding per finding from one run, A's then B's.
pub(super) fn single_run(cx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    let sides = [
        ('a', Some(cx.a), &cx.analysis.single_run_a),
        ('b', cx.b, &cx.analysis.single_run_b),
    ];
    for (side, dump, run) in sides {
        let Some(dump) = dump else { continue };
        for f in &run.findings {
            let evidence: Vec<Cite> = f
                .records
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let window = dump
                        .windows
                        .iter()
                        .find(|w| w.source.display().to_string() == r.source)?;
                    let record = record(window, &r.key)?;
                    let mut c = cite(side, window, record, role(f, i), Claim::Captured);
                    if f.kind == Kind::StaleOutput {
                        c.call = Some(format!("{:?} call {}", r.label, r.call));
                    }
                    Some(c)
                })
                .collect();
            let whose = match (cx.b, side) {
                (None, _) => String::new(),
                (Some(_), side) => format!("In {}, ", side.to_ascii_uppercase()),
            };
            out.push(Finding {
                rule: Rule::SingleRun,
                text: format!(
                    "{whose}{}: {}. Look at {}.",
                    f.kind.title(),
                    f.sentence,
                    f.look_at
                ),
                evidence,
                address: None,
                presumed: false,
                inputs: Vec::new(),
            });
        }
    }
    out
}

/// The role of the `i`-th record of finding `f` (the order [`single_run`]'s rules give).
fn role(f: &single_run::Finding, i: usize) -> Role {
    match f.kind {
        Kind::DuplicateShards => Role::Duplicate,
        // The silent ranks' records, then one rank's non-zero record.
        Kind::SilentRank if i + 1 < f.records.len() => Role::Silent,
        Kind::SilentRank => Role::Control,
        // The stale record, its previous occurrence, then the record before each.
        Kind::StaleOutput => match i {
            0 => Role::Stale,
            1 => Role::Previous,
            _ => Role::Before,
        },
    }
}

/// One finding per moved write of the diff: B's write (the run under suspicion) at the
/// address it wrote, A's as the agreeing partner.
pub(super) fn moved_writes(cx: &Context) -> Vec<Finding> {
    let (Some(b), Some(report)) = (cx.b, cx.analysis.diff.as_ref()) else {
        return Vec::new();
    };
    report
        .layout_differences
        .moved
        .iter()
        .filter_map(|m| moved_write(cx, b, m))
        .collect()
}

fn moved_write(cx: &Context, b: &crate::model::dump::Dump, m: &MovedWrite) -> Option<Finding> {
    let (wa, ra) = by_seq(cx.a, m, m.seq_a)?;
    let (wb, rb) = by_seq(b, m, m.seq_b)?;
    let mut writer_b = cite('b', wb, rb, Role::Writer, Claim::Agrees);
    writer_b.layout = Some(layout_words(rb));
    let mut writer_a = cite('a', wa, ra, Role::Partner, Claim::Agrees);
    writer_a.layout = Some(layout_words(ra));
    let address = rb.storage_ptr.map(|ptr| {
        let start = ptr + rb.storage_offset * u64::from(rb.element_size);
        Address {
            device: rb.device.to_string(),
            storage_id: rb.storage_id,
            storage_ptr: ptr,
            bytes: (start, start + rb.numel * u64::from(rb.element_size)),
        }
    });
    Some(Finding {
        rule: Rule::MovedWrite,
        text: format!(
            "{}: B's `{}` puts the right values at the wrong place, so what later reads the \
             block its table assigns finds other values. Look at the writer's slot or block \
             index.",
            m.text.trim_end_matches('.'),
            m.key
        ),
        evidence: vec![writer_b, writer_a],
        address,
        presumed: false,
        inputs: Vec::new(),
    })
}

/// The window of `m`'s rank in `dump` holding `m`'s key at `seq`, with the record.
fn by_seq<'d>(
    dump: &'d crate::model::dump::Dump,
    m: &MovedWrite,
    seq: u64,
) -> Option<(
    &'d crate::model::dump::Window,
    &'d crate::model::dump::Record,
)> {
    dump.windows
        .iter()
        .filter(|w| w.rank == m.rank)
        .find_map(|w| {
            let r = record(w, &m.key).filter(|r| r.seq == seq)?;
            Some((w, r))
        })
}
