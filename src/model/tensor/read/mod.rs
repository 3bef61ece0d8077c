//! The readers of tensor files: the container formats (`pt`, `safetensors`), the pickle
//! machine `.pt` archives need (`pickle`), element types (`dtype`) and strided views over
//! storage bytes (`view`), tied together by the opened file (`file`).

mod dtype;
mod file;
pub mod pickle;
mod pt;
mod safetensors;
mod view;

pub use dtype::DType;
pub use file::{FileFormat, TensorEntry, TensorError, TensorFile};
pub use pt::read_pickle;
pub use view::TensorView;
