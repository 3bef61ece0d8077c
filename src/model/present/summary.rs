//! The text of a window summary.

use crate::model::analysis::summary::WindowSummary;

impl WindowSummary {
    /// One line per fact, for the terminal.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}\n  label {:?} (match {}, call {}), rank {}: {} records ({} graph), {} stages, {} saved tensors, {} input sets",
            self.source,
            self.label,
            self.match_index,
            self.occurrence,
            self.rank,
            self.records,
            self.graph_records,
            self.stages,
            self.saved_tensors,
            self.input_sets,
        );
        if let Some(n) = self.token_count {
            out.push_str(&format!(", {n} token ids"));
        }
        match &self.first_nonfinite {
            Some(nf) => out.push_str(&format!(
                "\n  first non-finite: {} (seq {}, {})",
                nf.key,
                nf.seq,
                nf.counts_text()
            )),
            None => out.push_str("\n  first non-finite: none"),
        }
        out
    }
}
