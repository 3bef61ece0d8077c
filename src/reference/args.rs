//! Binding a captured input set to a built-in's parameters, as replay_op.py binds a callable:
//! by keyword when every captured name is a parameter, else positionally in captured order.

use tch::Tensor;

use super::failure::{Computed, Failure};
use super::{ReferenceError, Upcast, convert};
use crate::model::input_set::{InputSet, InputValue};

/// One built-in reference: its name, its parameters and where its formula comes from.
pub struct Builtin {
    /// The name after `builtin:`.
    pub name: &'static str,
    /// Parameter names, in order (the positional order).
    pub params: &'static [&'static str],
    /// How many leading parameters are required; the rest have defaults.
    pub required: usize,
    /// Output names, in order: `["out"]`, or `["out.0", "out.1"]` for a pair.
    pub outputs: &'static [&'static str],
    /// The canonical source of the formula.
    pub source: &'static str,
    pub(crate) compute: fn(&Args<'_>) -> Computed<Vec<Tensor>>,
}

/// The captured values bound to a built-in's parameters.
pub struct Args<'a> {
    builtin: &'static Builtin,
    /// One per parameter of `builtin.params`; `None` when not given.
    values: Vec<Option<(&'a str, &'a InputValue)>>,
    upcast: Upcast,
}

impl<'a> Args<'a> {
    /// Binds `inputs` to `builtin`'s parameters.
    pub(crate) fn bind(
        builtin: &'static Builtin,
        inputs: &'a InputSet,
        upcast: Upcast,
    ) -> Result<Args<'a>, ReferenceError> {
        let problem = |problem: String| ReferenceError::Arguments {
            builtin: builtin.name,
            problem,
        };
        let params = builtin.params;
        let mut values = vec![None; params.len()];
        let by_keyword = inputs
            .args
            .iter()
            .all(|(name, _)| params.contains(&name.as_str()));
        if by_keyword {
            for (name, value) in &inputs.args {
                let at = params
                    .iter()
                    .position(|p| p == name)
                    .expect("checked above");
                values[at] = Some((name.as_str(), value));
            }
        } else {
            if inputs.args.len() > params.len() {
                let names: Vec<_> = inputs.args.iter().map(|(n, _)| n.as_str()).collect();
                return Err(problem(format!(
                    "{} captured arguments ({}) for {} parameters ({}); passed positionally, \
                     since not every captured name is a parameter",
                    names.len(),
                    names.join(", "),
                    params.len(),
                    params.join(", ")
                )));
            }
            for (slot, (name, value)) in values.iter_mut().zip(&inputs.args) {
                *slot = Some((name.as_str(), value));
            }
        }
        for (param, value) in params.iter().zip(&values).take(builtin.required) {
            match value {
                None => {
                    let captured: Vec<_> = inputs.args.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(problem(format!(
                        "no argument for parameter `{param}` (captured: {})",
                        captured.join(", ")
                    )));
                }
                Some((name, InputValue::None)) => {
                    return Err(problem(format!("parameter `{param}` (`{name}`) is None")));
                }
                Some(_) => {}
            }
        }
        Ok(Args {
            builtin,
            values,
            upcast,
        })
    }

    /// The value bound to parameter `param`, with the captured name; `None` when absent or
    /// captured as Python's `None`.
    fn get(&self, param: &str) -> Option<(&'a str, &'a InputValue)> {
        let at = self
            .builtin
            .params
            .iter()
            .position(|p| *p == param)
            .unwrap_or_else(|| panic!("builtin {} has no parameter {param}", self.builtin.name));
        self.values[at].filter(|(_, v)| !matches!(v, InputValue::None))
    }

    /// Parameter `param` as a tensor, rebuilt and upcast; it must be given.
    pub(crate) fn tensor(&self, param: &str) -> Computed<Tensor> {
        self.opt_tensor(param)?
            .ok_or_else(|| Failure::Arguments(format!("no tensor for parameter `{param}`")))
    }

    /// Parameter `param` as a tensor, rebuilt and upcast, or `None` when not given.
    pub(crate) fn opt_tensor(&self, param: &str) -> Computed<Option<Tensor>> {
        match self.get(param) {
            None => Ok(None),
            Some((_, InputValue::Tensor(t))) => convert::captured(t, self.upcast).map(Some),
            Some((name, other)) => Err(Failure::Arguments(format!(
                "parameter `{param}` (`{name}`) is a {}, not a tensor",
                other.kind()
            ))),
        }
    }

    /// Parameter `param` as a float (a captured int or float; a bool is refused), or `None`.
    pub(crate) fn float(&self, param: &str) -> Computed<Option<f64>> {
        match self.get(param) {
            None => Ok(None),
            Some((_, InputValue::Float(f))) => Ok(Some(*f)),
            Some((_, InputValue::Int(i))) => Ok(Some(*i as f64)),
            Some((name, other)) => Err(Failure::Arguments(format!(
                "parameter `{param}` (`{name}`) is a {}, not a float",
                other.kind()
            ))),
        }
    }

    /// Parameter `param` as an int, or `None`.
    pub(crate) fn int(&self, param: &str) -> Computed<Option<i64>> {
        match self.get(param) {
            None => Ok(None),
            Some((_, InputValue::Int(i))) => Ok(Some(*i)),
            Some((name, other)) => Err(Failure::Arguments(format!(
                "parameter `{param}` (`{name}`) is a {}, not an int",
                other.kind()
            ))),
        }
    }
}
