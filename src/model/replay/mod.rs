//! Single-operator replay, judged: `assets/replay_op.py` reruns one captured input set
//! through a candidate operator and a reference and writes the outputs; this module reads
//! them back ([`load`], [`record`]) and judges them under a named [`Standard`]
//! (docs/replay.md, "Verdicts"):
//!
//! - [`msprobe`]: the single-device rule of msprobe's API accuracy checker
//!   (mindstudio-probe 26.2.0);
//! - [`dynamo`]: PyTorch's `torch._dynamo.utils.same` (torch 2.13.0), RMSE against float64;
//! - [`allclose`]: explicit tolerances, as `dumpview tensors` evaluates them.
//!
//! One standard per file: each holds its rule and figures; [`Standard::against`] says which
//! side it judges against, so [`judge`] dispatches to the rule and names no standard else.
//!
//! Each output's judgement carries the metrics of `dumpview tensors` (`model::tensor::metrics`)
//! next to the standard's own figures; the replay's verdict is the worst output's, or the
//! candidate's crash or refusal, which are never numerical mismatches.
//!
//! A process that died in a side (a segfaulting kernel) is recorded by [`ended`] from the
//! partial record replay_op.py wrote before that side, and judged as any crash.
//!
//! For the workbench's replay dialog: [`suggest`] guesses the built-in reference of a stage,
//! [`history`] is the format of its earlier entries.
//!
//! The reference sides may also be computed in memory (feature `torch`'s in-process
//! built-ins, `crate::reference`): [`side::SideTensors`] holds either, and one judging path
//! reads both.
//!
//! Pure logic over what it is handed, except [`load`], which reads the one directory it is
//! given. Running the script is the runtime's (`services::replay`).

pub mod allclose;
pub mod cross;
pub mod dynamo;
pub mod ended;
pub mod history;
pub mod judge;
pub mod load;
pub mod msprobe;
pub mod prepare;
pub mod record;
pub mod run;
pub mod side;
pub mod standard;
pub mod suggest;

pub use judge::{OutputJudgement, Replay, SideOutputs, SideSummary};
pub use load::{ReplayDir, judge_dir};
pub use record::ReplayRecord;
pub use run::{Execution, ReplayResult};
pub use side::{ComputedTensor, SideTensors};
pub use standard::{Against, ReplayVerdict, Standard};
