//! The diagnosis's values: findings, the records they cite with the property claimed, the
//! storage bytes they are about, and the next experiment.

use serde::Serialize;

/// Which rule a finding comes from, in the order the conclusion prefers them (the most
/// specific first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The first divergence (or first non-finite) reads bytes another record wrote through a
    /// layout that disagrees, or that differs between A and B: writer → address → reader.
    WriterAddressReader,
    /// A write whose values agree with A's was put at another place in its pool than its
    /// block table assigns (the diff's layout differences).
    MovedWrite,
    /// The first non-finite record's bytes were captured finite by an earlier record.
    BadBytesWriter,
    /// Both sides captured the first divergent stage's input set: the inputs, compared first,
    /// say whether the operator or its inputs differ.
    OperatorOrInputs,
    /// Values moved (same magnitudes, positions differ) after integer index stages that differ.
    MovedValues,
    /// A finding from one run: duplicate shards, a silent rank, a stale output.
    SingleRun,
    /// A replicated tensor differs across ranks, or one rank went non-finite first: the
    /// collective before it.
    AcrossRanks,
    /// Where the numbers first go wrong, and what is only downstream of it in capture order.
    Origin,
}

impl Rule {
    /// The rule's name as the JSON spells it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::WriterAddressReader => "writer_address_reader",
            Rule::MovedWrite => "moved_write",
            Rule::SingleRun => "single_run",
            Rule::BadBytesWriter => "bad_bytes_writer",
            Rule::OperatorOrInputs => "operator_or_inputs",
            Rule::MovedValues => "moved_values",
            Rule::AcrossRanks => "across_ranks",
            Rule::Origin => "origin",
        }
    }
}

/// What a finding says a cited record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Wrote the bytes another record reads (captured earlier, same storage).
    Writer,
    /// Reads bytes a writer wrote.
    Reader,
    /// The last record captured finite over the bytes a non-finite record then held.
    LastFiniteWriter,
    /// The first record holding NaN or infinity.
    FirstNonFinite,
    /// Where the numbers first go wrong.
    Origin,
    /// A later divergent or non-finite record, downstream in capture order only.
    Downstream,
    /// A later record shown (by its input storage) to read the origin's output.
    Propagated,
    /// An integer index stage that differs before values moved.
    Suspect,
    /// The record whose values moved.
    Moved,
    /// The collective captured before a rank's first non-finite record or a replica split.
    Collective,
    /// An operator input captured with the input set (or a hooked module's input).
    Input,
    /// The last record before the first divergence that agrees: the upstream boundary.
    Upstream,
    /// A piece of a sliced stage equal to another rank's piece.
    Duplicate,
    /// A stage's output, exactly zero on a rank that received tokens.
    Silent,
    /// The same stage on a rank whose output is not zero.
    Control,
    /// An output bit-identical to its previous occurrence.
    Stale,
    /// The previous occurrence a stale output repeats.
    Previous,
    /// The other side's record of a moved write's key, where that side placed it.
    Partner,
    /// The record just before a stale output (or before its previous occurrence), which
    /// changed.
    Before,
}

/// The property a finding claims of a cited record; a test checks every one against the
/// captures (`diagnosis_cites_hold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Claim {
    /// The A/B pair of this key, in this rank's window pair, diverges.
    Diverges,
    /// The A/B pair of this key agrees.
    Agrees,
    /// The record holds NaN or infinity.
    NonFinite,
    /// The record holds no NaN or infinity.
    Finite,
    /// The record is marked as a collective's output.
    Collective,
    /// The record was captured (nothing more is claimed).
    Captured,
}

/// One record a finding rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cite {
    /// `'a'` or `'b'`: the capture holding the record (the side whose property is claimed; a
    /// pair claim holds for both).
    pub side: char,
    /// The window's rank.
    pub rank: u32,
    /// The window's source (manifest path).
    pub window: String,
    /// `stage#occurrence`.
    pub key: String,
    /// The record's `seq` in that window.
    pub seq: u64,
    /// What the finding says the record is.
    pub role: Role,
    /// What it claims of it.
    pub claim: Claim,
    /// The layout in words (`[12, 2, 64] stride [64, 2048, 1] offset 0`) where the finding
    /// rests on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
    /// The window's label and call (`"decode" call 3`) where a finding compares calls of one
    /// label (a stale output and the occurrence it repeats), so that equal keys are told
    /// apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

/// Bytes of one storage that a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Address {
    /// The device the storage lives on.
    pub device: String,
    /// The probe's identity of the live storage; `None` where the records carry none.
    pub storage_id: Option<u64>,
    /// The storage's data address, bytes.
    pub storage_ptr: u64,
    /// Half-open byte range `[lo, hi)` (absolute addresses) that every cited writer and reader
    /// touch.
    pub bytes: (u64, u64),
}

impl Address {
    /// `storage 13 on cpu, bytes [0x5605…, 0x5605…) (6144 bytes)`.
    pub fn describe(&self) -> String {
        let storage = match self.storage_id {
            Some(id) => format!("storage {id}"),
            None => format!("storage_ptr {:#x}", self.storage_ptr),
        };
        format!(
            "{storage} on {}, bytes [{:#x}, {:#x}) ({} bytes)",
            if self.device.is_empty() {
                "an unnamed device"
            } else {
                &self.device
            },
            self.bytes.0,
            self.bytes.1,
            self.bytes.1 - self.bytes.0
        )
    }
}

/// One rule that applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// The finding in one or two sentences, naming its records.
    pub text: String,
    /// The records it rests on, in chain order (writer before reader, origin before
    /// downstream).
    pub evidence: Vec<Cite>,
    /// The storage and bytes it is about (writer/reader and bad-bytes findings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<Address>,
    /// True when the writer is presumed: the real writer may have run before the window
    /// (an earlier call of the label, as in decode).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub presumed: bool,
    /// The first divergent stage's inputs, A against B (operator-or-inputs findings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputCompared>,
}

/// Which rung of seed 000's ladder the next experiment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Change one operator or one setting and rerun (a suggestion in words, never a made-up
    /// command).
    Ablation,
    /// Capture again with other `DUMP_PROBE_*` settings (full tensors of a stage, every rank).
    Capture,
    /// Feed each side's operator the other side's captured inputs (`dumpview replay --cross`).
    CrossReplay,
    /// Rerun one captured input set through a candidate and a reference.
    Replay,
    /// Add an input set, a stage or a hook in the code (words: dumpview cannot write it).
    Instrument,
}

/// The one step that would separate the hypotheses left.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    /// Which kind of step.
    pub step: Step,
    /// What to do and what it would tell, in words.
    pub text: String,
    /// The exact command(s), one per line, where dumpview knows them: a capture rerun from the
    /// recorded command line with the new settings, or a `dumpview` command with ranks,
    /// windows and occurrences filled in. Empty for an ablation or an edit.
    pub commands: Vec<String>,
}

/// The diagnosis of one capture or a capture pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The conclusion in one sentence; `No diagnosis: <reason>` when no rule applied.
    pub conclusion: String,
    /// False for "No diagnosis".
    pub found: bool,
    /// The rules that applied, most specific first.
    pub findings: Vec<Finding>,
    /// What is not known: rules whose evidence is missing, each with what would supply it.
    pub unknown: Vec<String>,
    /// The next cheapest experiment; `None` (JSON `null`) when nothing was found to follow.
    pub next: Option<Experiment>,
}

impl Diagnosis {
    /// The chain the workbench walks: every cited record in finding order, each once
    /// (side, rank, key), writer before reader before origin.
    pub fn chain(&self) -> Vec<&Cite> {
        let mut seen = std::collections::HashSet::new();
        self.findings
            .iter()
            .flat_map(|f| &f.evidence)
            .filter(|c| seen.insert((c.side, c.rank, c.key.clone())))
            .collect()
    }
}

/// One input of the first divergent stage, A against B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputCompared {
    /// The argument's name in the input set (`x`, `weight`, `eps`; nested `args.0`), or the
    /// hooked input's key.
    pub name: String,
    /// `agree`, or the verdict's name (`magnitude`, `structural`, …), or `differs` for a
    /// scalar; `unknown` when a tensor carries no statistics on a side.
    pub verdict: String,
    /// What it was on each side, for scalars (`1e-06 vs 1e-05`); empty for tensors.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub values: String,
}

impl InputCompared {
    /// Whether this input differs between the sides (not `agree`, not `unknown`).
    pub fn differs(&self) -> bool {
        self.verdict != "agree" && self.verdict != "unknown"
    }
}
