//! `object_jq`: runs a jq filter over the data and replaces the data with its result.
//!
//! Substation compatibility: the same setting (`filter`, required) and the same rule for
//! the number of results: none is an error, one replaces the data, several replace it with
//! a JSON array of them. Data that is not JSON (empty data included) is an error. The
//! engine is jaq (a Rust implementation of jq with jq's standard library: `map`, `select`,
//! `test`, `@base64`, `todate`, ...) where Substation uses gojq; filters that both accept
//! give the same values. The filter is compiled once, when the pipeline is built, so a
//! filter that does not parse or names an undefined function is a configuration error at
//! `settings.filter` with jaq's message and the column, not an error on every message.
//!
//! Differences from Substation, which runs the filter on Go's decoding of the data: object
//! keys keep their order (Go's encoder sorts them), integers keep every digit (Go turns
//! them into floats first, so ones beyond 2^53 are rounded), and a filter that produces
//! more than [`MAX_RESULTS`] values is an error instead of exhausting memory. As in
//! Substation, floats with an integral value are written as integers, and NaN and the
//! infinities as `null`. A result that JSON cannot represent (a byte string from
//! `tobytes`, an object key that is not a string) is an error naming what it is.

use jaq_core::load::{Arena, File, Loader, lex, parse};
use jaq_core::{Ctx, Vars, compile, data, load};
use jaq_json::{Num, Val};
use serde::Deserialize;
use sluice_engine::{
    Build, ConfigError, InPlace, Map, MapTransform, Message, Number, TransformError, Value, value,
};

/// The most values one run of the filter may produce (`range(1e9)` would otherwise fill
/// memory).
pub(crate) const MAX_RESULTS: usize = 1_000_000;

/// Settings of `object_jq`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The jq filter (required).
    pub filter: Option<String>,
}

type Filter = jaq_core::Filter<data::JustLut<Val>>;

/// The `object_jq` transform.
pub(crate) struct ObjectJq {
    filter: Filter,
}

impl ObjectJq {
    /// Builds it from its settings, compiling the filter.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let code = match s.filter {
            Some(f) if !f.trim().is_empty() => f,
            _ => {
                return Err(b.field_error(
                    "filter",
                    "missing required option: the jq filter to run on the data",
                ));
            }
        };
        let filter = compile_filter(&code).map_err(|e| b.field_error("filter", e))?;
        Ok(ObjectJq { filter })
    }
}

/// Parses and compiles `code` with jq's standard library, or says why it cannot.
pub(crate) fn compile_filter(code: &str) -> Result<Filter, String> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(&arena, File { code, path: () })
        .map_err(|errs| describe_load_errors(code, errs))?;
    jaq_core::Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errs| describe_compile_errors(code, errs))
}

/// The 1-based column of `part` (a slice of `code`) in `code`.
fn column(code: &str, part: &str) -> usize {
    let start = load::span(code, part).start;
    code[..start.min(code.len())].chars().count() + 1
}

/// What comes at `part`, shortened, for an error message.
fn near(part: &str) -> String {
    let shown: String = part.chars().take(20).collect();
    if shown.is_empty() {
        "the end of the filter".to_string()
    } else if shown.len() < part.len() {
        format!("`{shown}...`")
    } else {
        format!("`{shown}`")
    }
}

fn describe_load_errors(code: &str, errs: load::Errors<&str, ()>) -> String {
    let mut out = Vec::new();
    for (_, e) in errs {
        match e {
            load::Error::Io(io) => {
                for (path, why) in io {
                    out.push(format!("cannot import {path:?}: {why}"));
                }
            }
            load::Error::Lex(lex) => {
                for (expect, at) in lex {
                    out.push(format!(
                        "cannot parse the filter: expected {} at column {} (near {})",
                        lex_expect(&expect),
                        column(code, at),
                        near(at)
                    ));
                }
            }
            load::Error::Parse(parse) => {
                for (expect, at) in parse {
                    out.push(format!(
                        "cannot parse the filter: expected {} at column {} (near {})",
                        parse_expect(&expect),
                        column(code, at),
                        near(at)
                    ));
                }
            }
        }
    }
    out.join("; ")
}

fn lex_expect(e: &lex::Expect<&str>) -> &'static str {
    e.as_str()
}

fn parse_expect<'a>(e: &parse::Expect<&'a str>) -> &'a str {
    e.as_str()
}

fn describe_compile_errors(code: &str, errs: compile::Errors<&str, ()>) -> String {
    let mut out = Vec::new();
    for (_, list) in errs {
        for (name, undefined) in list {
            let what = match undefined {
                compile::Undefined::Filter(arity) => format!("filter `{name}/{arity}`"),
                other => format!("{} `{name}`", other.as_str()),
            };
            out.push(format!(
                "cannot compile the filter: undefined {what} at column {}",
                column(code, name)
            ));
        }
    }
    out.join("; ")
}

impl MapTransform for ObjectJq {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectJq {
    /// Runs the filter over the data, which must be JSON.
    pub(crate) fn run(&self, input: &Value) -> Result<Value, TransformError> {
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new([]));
        let mut results = Vec::new();
        for r in self.filter.id.run((ctx, to_val(input))) {
            // Not jaq's `unwrap_valr`: on `halt` and `halt_error` it exits the process
            // (sluice, or `sluice play`'s worker), where here it is that message's error.
            let v = r.map_err(|e| match e.get_err() {
                Ok(e) => TransformError::failed(format!("jq: {e}")),
                Err(e) => TransformError::failed(match e.get_halt() {
                    Ok(code) => format!(
                        "jq: the filter called halt (exit code {code}), which stops this \
                         message's filter, never sluice"
                    ),
                    Err(_) => "jq: the filter stopped without a value".to_string(),
                }),
            })?;
            if results.len() == MAX_RESULTS {
                return Err(TransformError::failed(format!(
                    "jq: the filter produced more than {MAX_RESULTS} results"
                )));
            }
            results.push(from_val(&v)?);
        }
        if results.len() > 1 {
            return Ok(Value::Array(results.into()));
        }
        results
            .pop()
            .ok_or_else(|| TransformError::failed("jq: no output generated"))
    }

    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let input = msg.data_value().ok_or_else(|| {
            TransformError::NotJson(if msg.data().is_empty() {
                "jq: the data is empty, not JSON".into()
            } else {
                "jq: the data is not JSON".into()
            })
        })?;
        let out = self.run(input)?;
        msg.set_data_value(out);
        Ok(())
    }
}

/// A message value as a jaq value.
fn to_val(v: &Value) -> Val {
    match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Val::Num(Num::from_integral(i))
            } else if let Some(u) = n.as_u64() {
                Val::Num(Num::from_integral(u))
            } else {
                Val::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Val::from(s.to_string()),
        Value::Array(a) => a.iter().map(to_val).collect(),
        Value::Object(m) => Val::obj(
            m.iter()
                .map(|(k, v)| (Val::from(k.to_string()), to_val(v)))
                .collect(),
        ),
    }
}

/// A jaq value as a message value; errors for what JSON cannot hold.
fn from_val(v: &Val) -> Result<Value, TransformError> {
    Ok(match v {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => from_num(n),
        Val::TStr(s) => Value::from(String::from_utf8_lossy(s)),
        Val::BStr(_) => {
            return Err(TransformError::failed(
                "jq: a result holds a byte string, which JSON cannot represent (convert it with `tostring` or `@base64`)",
            ));
        }
        Val::Arr(a) => Value::Array(a.iter().map(from_val).collect::<Result<_, _>>()?),
        Val::Obj(o) => {
            let mut m = Map::with_capacity(o.len());
            for (k, v) in o.iter() {
                let Val::TStr(k) = k else {
                    return Err(TransformError::failed(format!(
                        "jq: a result has an object key that is not a string ({k}), which JSON cannot represent"
                    )));
                };
                m.insert(String::from_utf8_lossy(k).into_owned(), from_val(v)?);
            }
            Value::Object(m)
        }
    })
}

fn from_num(n: &Num) -> Value {
    match n {
        Num::Int(i) => Value::Number(Number::from(*i as i64)),
        Num::Float(f) => value::number(*f),
        Num::BigInt(b) => from_number_text(&b.to_string()),
        Num::Dec(d) => from_number_text(d),
    }
}

/// Big integers and decimal literals: exact when they fit 64 bits, else a float.
fn from_number_text(text: &str) -> Value {
    if let Ok(i) = text.parse::<i64>() {
        Value::Number(Number::from(i))
    } else if let Ok(u) = text.parse::<u64>() {
        Value::Number(Number::from(u))
    } else {
        value::number(text.parse::<f64>().unwrap_or(f64::NAN))
    }
}

/// What registers the `object_jq` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_jq",
    aliases: &[],
    library: "sub.tf.obj.jq",
    summary: "replaces the data with the result of a jq filter",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"filter": "."}"#,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use sluice_engine::{json, testing};

    const TYPE: &str = "object_jq";

    #[test]
    fn cases() {
        let cases = [
            ("identity", ".", r#"{"a":1}"#, r#"{"a":1}"#),
            ("field", ".a", r#"{"a":{"b":2}}"#, r#"{"b":2}"#),
            ("string result is JSON text", ".s", r#"{"s":"x"}"#, r#""x""#),
            (
                "several results become an array",
                ".[]",
                "[1,2,3]",
                "[1,2,3]",
            ),
            (
                "several via comma",
                ".a, .b",
                r#"{"a":1,"b":"2"}"#,
                r#"[1,"2"]"#,
            ),
            ("null result", ".missing", r#"{"a":1}"#, "null"),
            (
                "construct an object, order kept",
                "{z: .a, a: .b}",
                r#"{"a":1,"b":2}"#,
                r#"{"z":1,"a":2}"#,
            ),
            (
                "standard library: map and select",
                "map(select(.n > 1)) | length",
                r#"[{"n":1},{"n":2},{"n":3}]"#,
                "2",
            ),
            (
                "standard library: test (regex)",
                r#".[] | select(test("^a"))"#,
                r#"["ab","b"]"#,
                r#""ab""#,
            ),
            (
                "standard library: @base64",
                "@base64",
                r#""hello""#,
                r#""aGVsbG8=""#,
            ),
            ("math: floor", ".x | floor", r#"{"x":2.7}"#, "2"),
            (
                "integral float written as integer",
                ".x * 2",
                r#"{"x":1.5}"#,
                "3",
            ),
            ("float stays float", ".x / 4", r#"{"x":1}"#, "0.25"),
            (
                "large integer kept exact",
                ".id",
                r#"{"id":30400402455622563}"#,
                "30400402455622563",
            ),
            (
                "u64 kept exact",
                ".id",
                r#"{"id":18446744073709551615}"#,
                "18446744073709551615",
            ),
            ("nan is null", "nan", "{}", "null"),
            ("literal decimal", "1.25", "{}", "1.25"),
            (
                "to_entries",
                "to_entries | map(.key)",
                r#"{"b":1,"a":2}"#,
                r#"["b","a"]"#,
            ),
            ("reduce", "reduce .[] as $x (0; . + $x)", "[1,2,3,4]", "10"),
            (
                "time: todate",
                "todate",
                "1700000000",
                r#""2023-11-14T22:13:20Z""#,
            ),
        ];
        let r = registry();
        let table: Vec<_> = cases
            .iter()
            .map(|(name, filter, input, want)| (*name, json!({"filter": filter}), *input, *want))
            .collect();
        testing::assert_single_outputs(&r, TYPE, &table);
    }

    #[test]
    fn metadata_is_kept() {
        let t = testing::build(
            &registry(),
            json!({"type": TYPE, "settings": {"filter": ".a"}}),
        )
        .unwrap();
        let mut m = Message::new(&br#"{"a":1}"#[..]);
        m.set_metadata(&br#"{"m":true}"#[..]);
        let p = sluice_engine::Pipeline::new(vec![(std::sync::Arc::from("t"), t)]);
        let out = testing::block_on(p.apply(vec![m])).unwrap();
        assert_eq!(&out[0].data()[..], b"1");
        assert_eq!(&out[0].metadata()[..], br#"{"m":true}"#);
    }

    #[test]
    fn errors() {
        let cases = [
            (
                "no output",
                "empty",
                r#"{"a":1}"#,
                "jq: no output generated",
            ),
            (
                "select nothing",
                ".[] | select(. > 5)",
                "[1,2]",
                "no output generated",
            ),
            ("runtime error", ".a + 1", r#"{"a":"x"}"#, "jq: cannot"),
            ("error()", r#"error("boom")"#, "{}", "boom"),
            ("not JSON", ".", "not json", "jq: the data is not JSON"),
            ("empty data", ".", "", "jq: the data is empty, not JSON"),
            ("byte string", "tobytes", r#""ab""#, "byte string"),
            (
                "non-string key",
                "{(1): 2}",
                "{}",
                "object key that is not a string",
            ),
            // jaq's own runner exits the process on these.
            (
                "halt",
                "halt",
                "{}",
                "jq: the filter called halt (exit code 0)",
            ),
            (
                "halt_error",
                "halt_error",
                r#"{"a":1}"#,
                "jq: the filter called halt (exit code 5)",
            ),
            (
                "halt_error with a code",
                ".a | halt_error(3)",
                r#"{"a":"bye"}"#,
                "(exit code 3)",
            ),
            (
                "too many results",
                "range(2000000)",
                "{}",
                "more than 1000000 results",
            ),
        ];
        let r = registry();
        for (name, filter, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": {"filter": filter}}))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let err = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(err.starts_with("transform under_test: "), "{name}: {err}");
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn config_errors() {
        let r = registry();
        let cases = [
            (json!({}), "settings.filter: missing required option"),
            (
                json!({"filter": "  "}),
                "settings.filter: missing required option",
            ),
            (
                json!({"filter": ".a | "}),
                "settings.filter: cannot parse the filter: expected term at column 6",
            ),
            (
                json!({"filter": ".a)"}),
                "settings.filter: cannot parse the filter",
            ),
            (
                json!({"filter": "\"abc"}),
                "settings.filter: cannot parse the filter",
            ),
            (
                json!({"filter": ".a | nosuchfn(1)"}),
                "settings.filter: cannot compile the filter: undefined filter `nosuchfn/1` at column 6",
            ),
            (
                json!({"filter": "$undefined"}),
                "undefined variable `$undefined` at column 1",
            ),
            (
                json!({"filter": r#"import "x" as x; ."#}),
                "settings.filter: cannot import",
            ),
            (json!({"filter": 5}), "settings.filter"),
        ];
        for (settings, want) in cases {
            let err = testing::build(&r, json!({"type": TYPE, "settings": settings.clone()}))
                .err()
                .unwrap_or_else(|| panic!("{settings}: expected a config error"))
                .to_string();
            assert!(err.contains("(object_jq)"), "{err}");
            assert!(err.contains(want), "{settings}: {err}");
        }
    }
}
