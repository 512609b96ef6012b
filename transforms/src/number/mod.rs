//! The `number_*` family: clamp numbers and fold arrays of numbers with arithmetic.
//!
//! Results follow Substation's number output: integral results are written as integers,
//! others as floats; in data mode the data becomes the number's text without exponent or
//! trailing zeros (as Go's `strconv.FormatFloat(f, 'f', -1, 64)` prints it).

pub(crate) mod math_addition;
pub(crate) mod math_division;
pub(crate) mod math_multiplication;
pub(crate) mod math_subtraction;
pub(crate) mod maximum;
pub(crate) mod minimum;

use std::borrow::Cow;

use sluice_engine::{Message, Registry, TransformError, Value, value};

use crate::common::Io;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.map(&maximum::INFO, maximum::NumberMaximum::build);
    r.map(&minimum::INFO, minimum::NumberMinimum::build);
    r.computing(
        &math_addition::INFO,
        math_addition::NumberMathAddition::build,
        |t| t.math.io.keys(),
    );
    r.computing(
        &math_subtraction::INFO,
        math_subtraction::NumberMathSubtraction::build,
        |t| t.math.io.keys(),
    );
    r.computing(
        &math_multiplication::INFO,
        math_multiplication::NumberMathMultiplication::build,
        |t| t.math.io.keys(),
    );
    r.computing(
        &math_division::INFO,
        math_division::NumberMathDivision::build,
        |t| t.math.io.keys(),
    );
}

/// The text of a number as Go's `FormatFloat(f, 'f', -1, 64)` prints it: the shortest
/// digits that read back the same, no exponent, no trailing zeros.
pub(crate) fn format_number(f: f64) -> String {
    if f == 0.0 {
        // Also turns -0 into 0, as the integer output does.
        return "0".to_string();
    }
    format!("{f}")
}

/// Writes a finite number: at the target key as a JSON number (integral values as
/// integers), or as the new data in its text form.
pub(crate) fn write_number(io: &Io, msg: &mut Message, f: f64) -> Result<(), TransformError> {
    match io {
        Io::Object { target, .. } => msg.set(target, value::number(f)),
        Io::Data => {
            msg.set_data(format_number(f).into_bytes());
            Ok(())
        }
    }
}

/// The input of a clamp (`number_maximum`, `number_minimum`): GJSON's `Float()` of the value
/// at the source key, or the data parsed as a number. `Ok(None)` when the source is missing;
/// data that is not a finite number is an error naming the transform.
pub(crate) fn read_number(
    type_name: &str,
    io: &Io,
    msg: &Message,
) -> Result<Option<f64>, TransformError> {
    match io {
        Io::Object { source, .. } => Ok(msg.get(source).map(|v| value::to_f64(&v))),
        Io::Data => {
            let text = String::from_utf8_lossy(msg.data());
            match text.trim().parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Some(f)),
                _ => {
                    let shown: String = text.chars().take(64).collect();
                    Err(TransformError::failed(format!(
                        "{type_name}: the data is not a number: {shown:?}"
                    )))
                }
            }
        }
    }
}

/// A left fold over a JSON array of numbers, shared by the `number_math_*` transforms.
pub(crate) struct Math {
    /// The transform's type name, for error messages.
    pub(crate) type_name: &'static str,
    /// Where to read and write.
    pub(crate) io: Io,
    /// One step of the fold; `Err` names why the step has no number as its result.
    pub(crate) op: fn(f64, f64) -> Result<f64, &'static str>,
}

impl Math {
    /// Folds the elements (each read with GJSON's `Float()`) from the left, starting with
    /// the first; an empty array gives 0 (Go's zero value). A step whose result is not a
    /// finite number (÷0, overflow) is an error naming the transform and the element.
    pub(crate) fn fold<'v>(
        &self,
        items: impl IntoIterator<Item = Cow<'v, Value>>,
    ) -> Result<f64, TransformError> {
        let mut iter = items.into_iter().enumerate();
        let Some((_, first)) = iter.next() else {
            return Ok(0.0);
        };
        let mut acc = value::to_f64(&first);
        for (i, item) in iter {
            let x = value::to_f64(&item);
            let r = (self.op)(acc, x).and_then(|r| {
                if r.is_finite() {
                    Ok(r)
                } else {
                    Err("the result is not a finite number")
                }
            });
            acc = r.map_err(|why| {
                TransformError::failed(format!(
                    "{}: {why} at element {i} ({}) of the array",
                    self.type_name,
                    value::to_text(&item)
                ))
            })?;
        }
        Ok(acc)
    }

    /// What [`Math::apply`] writes at the target from the values read at the source
    /// (`read`: a multipath's members that exist, or the value at a key when it exists):
    /// the fold of the members, or of the array at the key.
    pub(crate) fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        let f = match &self.io {
            Io::Object { source, .. } if source.path().is_array_multi() => {
                self.fold(read.iter().map(|v| Cow::Borrowed(*v)))?
            }
            _ => match read {
                [Value::Array(items)] => self.fold(items.iter().map(Cow::Borrowed))?,
                _ => return Ok(None),
            },
        };
        Ok(Some(value::number(f)))
    }

    /// Applies the fold to a message: arrays are folded, anything else passes. A source
    /// that is a multipath (`[a,b]`, the usual one) is folded as it is read, without
    /// building its array.
    pub(crate) fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let result = match &self.io {
            Io::Object { source, .. } if let Some(items) = msg.get_multi(source) => {
                Some(self.fold(items)?)
            }
            _ => match crate::object::read_json(&self.io, msg).as_deref() {
                Some(Value::Array(items)) => Some(self.fold(items.iter().map(Cow::Borrowed))?),
                _ => None,
            },
        };
        if let Some(f) = result {
            write_number(&self.io, msg, f)?;
        }
        Ok(())
    }
}
