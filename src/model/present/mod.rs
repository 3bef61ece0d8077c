//! Rendering of analyses for people and scripts: text, Markdown and JSON, and the number
//! formatters every renderer (and the workbench) uses.

pub mod cases;
pub mod cross;
pub mod diagnosis;
pub mod diff;
pub mod layouts;
pub mod number;
pub mod replay;
pub mod replay_list;
pub mod report;
pub mod scan;
pub mod summary;
pub mod tensors;
pub mod tokens;
pub mod tree;
pub mod vary;

/// `, attempt N` for a window re-run into its dump directory (attempt 1 goes unsaid): how the
/// diff text and the workbench header name [`crate::model::dump::Window::attempt`].
pub fn attempt_text(attempt: u32) -> String {
    if attempt > 1 {
        format!(", attempt {attempt}")
    } else {
        String::new()
    }
}
