//! Rendering of analyses for people and scripts: text, Markdown and JSON, and the number
//! formatters every renderer (and the workbench) uses.
