//! Why a built-in's formula stopped ([`Failure`]), before the built-in's name is attached
//! ([`Failure::into_error`]): shared by the argument binding, the conversions and the formulas.

use super::ReferenceError;

/// Why a formula stopped, before the built-in's name is attached.
#[derive(Debug)]
pub(crate) enum Failure {
    /// An argument does not fit.
    Arguments(String),
    /// libtorch raised.
    Torch(String),
}

impl From<tch::TchError> for Failure {
    fn from(e: tch::TchError) -> Self {
        let text = match e {
            tch::TchError::Torch(message) => message,
            other => other.to_string(),
        };
        // libtorch appends "Exception raised from <function> at <file>:<line>" and a C++
        // backtrace; the message is what precedes it.
        let message = text
            .split("\nException raised from")
            .next()
            .unwrap_or(&text)
            .trim()
            .to_string();
        Failure::Torch(message)
    }
}

impl Failure {
    /// The public error, naming the built-in.
    pub(crate) fn into_error(self, builtin: &'static str) -> ReferenceError {
        match self {
            Failure::Arguments(problem) => ReferenceError::Arguments { builtin, problem },
            Failure::Torch(message) => ReferenceError::Torch { builtin, message },
        }
    }
}

/// A formula's result.
pub(crate) type Computed<T> = Result<T, Failure>;
