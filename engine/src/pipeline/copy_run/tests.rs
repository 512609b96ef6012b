//! The fused run against its members one by one, on documents of every kind.

use super::*;
use crate::pipeline::{Pipeline, Stage};

/// `object_copy` with both keys, as the transforms crate has it.
struct Copy {
    source: Key,
    target: Key,
}

impl MapTransform for Copy {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        if let Some(v) = msg.get(&self.source).map(|v| v.into_owned()) {
            msg.set(&self.target, v)?;
        }
        Ok(InPlace::Keep)
    }
}

/// `object_insert`, as the transforms crate has it.
struct Insert {
    value: Value,
    target: Key,
}

impl MapTransform for Insert {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        msg.set(&self.target, self.value.clone())?;
        Ok(InPlace::Keep)
    }
}

/// Sets `key` to null: neither a copy nor an insert, so it ends a run.
struct Null(Key);

impl MapTransform for Null {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        msg.set(&self.0, Value::Null)?;
        Ok(InPlace::Keep)
    }
}

/// Upper-cases the text at a key, as `string_to_upper` does; the text `fail` is an error.
struct Upper {
    source: Key,
    target: Key,
}

impl Upper {
    fn of(v: &Value) -> Result<Value, TransformError> {
        let text = crate::value::to_text(v);
        if text == "fail" {
            return Err(TransformError::failed("upper: cannot"));
        }
        Ok(Value::String(text.to_uppercase().into()))
    }
}

impl MapTransform for Upper {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        if let Some(v) = msg.get(&self.source).map(|v| v.into_owned()) {
            msg.set(&self.target, Upper::of(&v)?)?;
        }
        Ok(InPlace::Keep)
    }
}

impl Compute for Upper {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        match read {
            [v] => Upper::of(v).map(Some),
            _ => Ok(None),
        }
    }
}

/// The sum of the members of a multipath that exist, as `number_math_addition` adds
/// them (on no JSON it does nothing); a member that is the string `fail` is an error.
struct Sum {
    source: Key,
    target: Key,
}

impl Sum {
    fn of<'a>(values: impl Iterator<Item = &'a Value>) -> Result<Value, TransformError> {
        let mut sum = 0.0;
        for v in values {
            if matches!(v, Value::String(s) if s == "fail") {
                return Err(TransformError::failed("sum: cannot"));
            }
            sum += crate::value::to_f64(v);
        }
        Ok(crate::value::number(sum))
    }
}

impl MapTransform for Sum {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        let values: Option<Vec<Value>> = msg
            .get_multi(&self.source)
            .map(|vs| vs.map(|v| v.into_owned()).collect());
        if let Some(values) = values {
            msg.set(&self.target, Sum::of(values.iter())?)?;
        }
        Ok(InPlace::Keep)
    }
}

impl Compute for Sum {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        Sum::of(read.iter().copied()).map(Some)
    }
}

fn copy(source: &str, target: &str) -> Transform {
    let (from, to) = (Key::parse(source).unwrap(), Key::parse(target).unwrap());
    let plan = MapPlan::Copy {
        from: from.clone(),
        to: to.clone(),
    };
    Transform::map_doing(
        plan,
        Copy {
            source: from,
            target: to,
        },
    )
}

fn insert(value: &str, target: &str) -> Transform {
    let value: Value = crate::json::parse::from_slice(value.as_bytes()).unwrap();
    let to = Key::parse(target).unwrap();
    let plan = MapPlan::Insert {
        value: value.clone(),
        to: to.clone(),
    };
    Transform::map_doing(plan, Insert { value, target: to })
}

/// The map transform `t` is.
fn map_of(t: &Transform) -> &dyn MapTransform {
    match t {
        Transform::Map(t, _) => t.as_ref(),
        other => unreachable!("{other:?} is not a map transform"),
    }
}

/// A copy as `(source, target)`.
type Copies = (&'static str, &'static str);

/// The copies `(source, target)` as steps `t0`, `t1`, ...; a source of `!null` is a
/// [`Null`] at the target, one of `=` and JSON an [`Insert`] of that JSON, one of `^`
/// and a path an [`Upper`] of it, one of `+` and a multipath a [`Sum`] of it.
fn steps(copies: &[(&str, &str)]) -> Vec<(Arc<str>, Transform)> {
    copies
        .iter()
        .enumerate()
        .map(|(i, (s, t))| {
            let t = match *s {
                "!null" => Transform::map(Null(Key::parse(t).unwrap())),
                s if s.starts_with('=') => insert(&s[1..], t),
                s if s.starts_with('^') || s.starts_with('+') => {
                    let (source, target) = (Key::parse(&s[1..]).unwrap(), Key::parse(t).unwrap());
                    let (from, to) = (source.clone(), target.clone());
                    if s.starts_with('^') {
                        Transform::map_computing(from, to, Upper { source, target })
                    } else {
                        Transform::map_computing(from, to, Sum { source, target })
                    }
                }
                s => copy(s, t),
            };
            (Arc::from(format!("t{i}")), t)
        })
        .collect()
}

/// The data after each step's `map` one after another, or the first error and the
/// data as the steps before it left it.
fn one_by_one(copies: &[(&str, &str)], data: &str) -> Result<String, String> {
    let mut msg = Message::new(data.as_bytes().to_vec());
    for (id, t) in steps(copies) {
        if let Err(e) = map_of(&t).map(&mut msg) {
            let e = e.within(&TransformName::from(id));
            return Err(format!("{e} | {}", String::from_utf8_lossy(msg.data())));
        }
    }
    Ok(String::from_utf8_lossy(msg.data()).into_owned())
}

/// The data after a pipeline of the steps (runs fused), or its error; and how many
/// steps the pipeline made of them.
fn fused(copies: &[(&str, &str)], data: &str) -> (Result<String, String>, usize) {
    let p = Pipeline::new(steps(copies).into_iter().collect());
    let made = match p.stages.as_slice() {
        [Stage::Stateless { steps, .. }] => steps.len(),
        _ => unreachable!("map steps are one stage"),
    };
    let mut msg = Message::new(data.as_bytes().to_vec());
    let out = match p.as_map().expect("map steps are a map").map(&mut msg) {
        Ok(_) => Ok(String::from_utf8_lossy(msg.data()).into_owned()),
        Err(e) => Err(format!("{e} | {}", String::from_utf8_lossy(msg.data()))),
    };
    (out, made)
}

const ZEEK: &str = r#"{"ts":1.5,"uid":"C1","id.orig_h":"10.0.0.1","id.orig_p":5,"id.resp_h":"10.0.0.2","id.resp_p":80,"proto":"tcp","service":"http","orig_bytes":1,"resp_bytes":2}"#;

/// Copies of every kind, on documents of every kind: the fused run gives what the
/// copies give one by one, errors (and the copy they name) included; `made` is how
/// many steps the pipeline has.
#[test]
fn a_fused_run_gives_what_its_copies_give_one_by_one() {
    let ecs: &[(&str, &str)] = &[
        ("event.original.id\\.orig_h", "client.address"),
        ("event.original.id\\.orig_h", "client.ip"),
        ("event.original.id\\.orig_p", "client.port"),
        ("event.original.id\\.resp_h", "server.address"),
        ("event.original.id\\.resp_p", "server.port"),
        ("event.original.proto", "network.transport"),
        ("event.original.missing", "network.protocol"),
    ];
    let wrapped = format!(r#"{{"event":{{"original":{ZEEK}}}}}"#);
    let cases: &[(&str, &[Copies], &str, usize)] = &[
        ("an ECS mapping", ecs, &wrapped, 1),
        (
            "into existing parents",
            ecs,
            r#"{"event":{"original":{"proto":"udp"}},"network":{"type":"ipv4"},"client":{"ip":"x"}}"#,
            1,
        ),
        (
            "parents that are scalars are replaced",
            ecs,
            r#"{"event":{"original":{"id.orig_h":"h","proto":"p"}},"client":"x","network":null}"#,
            1,
        ),
        (
            "a source under an object that is not one",
            ecs,
            r#"{"event":{"original":"text"}}"#,
            1,
        ),
        ("no JSON", ecs, "plain text", 1),
        ("empty data", ecs, "", 1),
        (
            "a document that is a number",
            &[("a", "b"), ("c", "d")],
            "5",
            1,
        ),
        (
            "a document that is an array",
            &[("a", "b"), ("c", "d")],
            "[1,2]",
            1,
        ),
        (
            "only the second source exists",
            &[("a", "x.y"), ("b", "x.z")],
            r#"{"b":2}"#,
            1,
        ),
        (
            "a string holding JSON becomes it",
            &[("a", "x"), ("b", "y")],
            r#"{"a":"{\"q\":1}","b":"[1]"}"#,
            1,
        ),
        (
            "one target written twice",
            &[("a", "x"), ("b", "x")],
            r#"{"a":1,"b":2}"#,
            1,
        ),
        (
            "one key written twice into a parent the run creates",
            &[("a", "x.y"), ("b", "x.z"), ("c", "x.y")],
            r#"{"a":1,"b":2,"c":3}"#,
            1,
        ),
        (
            "keys that differ into a parent the run creates, one source missing",
            &[("a", "x.y"), ("q", "x.w"), ("c", "x.z")],
            r#"{"a":1,"c":3}"#,
            1,
        ),
        (
            "keys that differ into a parent there but empty, from text",
            &[("a", "x.y"), ("b", "x.z")],
            r#"{"a":1,"b":2,"x":{ }}"#,
            1,
        ),
        (
            "keys that differ into a parent holding one of them",
            &[("a", "x.y"), ("b", "x.z")],
            r#"{"a":1,"b":2,"x":{"z":0,"k":1}}"#,
            1,
        ),
        (
            "a source a write before it changed",
            &[("a", "b"), ("b", "c")],
            r#"{"a":1,"b":2}"#,
            2,
        ),
        (
            "a source under a target written before",
            &[("a", "x"), ("x.y", "z")],
            r#"{"a":{"y":3},"x":{"y":4}}"#,
            2,
        ),
        (
            "a source above a target written before",
            &[("a", "x.y"), ("x", "z")],
            r#"{"a":1,"x":{"w":0}}"#,
            2,
        ),
        (
            "a source the same as an earlier one's target further on",
            &[("a", "b"), ("c", "d"), ("b", "e")],
            r#"{"a":1,"b":2,"c":3}"#,
            2,
        ),
        (
            "a non-copy between",
            &[("a", "x"), ("!null", "n"), ("b", "y"), ("c", "z")],
            r#"{"a":1,"b":2,"c":3}"#,
            3,
        ),
        (
            "an index is not fused",
            &[("a.0", "x"), ("b", "y")],
            r#"{"a":[7],"b":2}"#,
            2,
        ),
        (
            "a key into an array fails, under its copy's id",
            &[("a", "x"), ("a", "t.k"), ("a", "t.j")],
            r#"{"a":1,"t":[1]}"#,
            1,
        ),
        (
            "a write into a document that is a string fails",
            &[("a", "x"), ("b", "y")],
            r#""s""#,
            1,
        ),
        (
            "a top-level key set beside the shared parent",
            &[("s.a", "x"), ("s.b", "s.c"), ("s.d", "y")],
            r#"{"s":{"a":1,"b":2,"d":4}}"#,
            1,
        ),
        (
            "inserts among copies",
            &[
                ("event.original.uid", "event.id"),
                ("=\"event\"", "event.kind"),
                ("=[\"network\"]", "event.category"),
                ("event.original.proto", "network.transport"),
                ("=7", "network.type"),
            ],
            &wrapped,
            1,
        ),
        (
            "only inserts, into empty data",
            &[("=1", "a.b"), ("=[2]", "a.c"), ("={\"d\":3}", "e")],
            "",
            1,
        ),
        (
            "an insert over a value a copy wrote",
            &[("a", "x"), ("=null", "x"), ("b", "y")],
            r#"{"a":1,"b":2}"#,
            1,
        ),
        (
            "a copy of what an insert wrote",
            &[("=1", "x"), ("x", "y")],
            r#"{"x":0}"#,
            2,
        ),
        (
            "a string holding JSON inserted becomes it",
            &[
                ("=\"{\\\"q\\\":1}\"", "x"),
                ("=\"[1]\"", "y"),
                ("=\"{x\"", "z"),
            ],
            "{}",
            1,
        ),
        (
            "an insert into data that is not JSON fails, under its id",
            &[("a", "x"), ("=1", "y"), ("=2", "z")],
            "plain text",
            1,
        ),
        (
            "a document with bytes after it, a key set in it and keys added",
            &[("a", "a"), ("=2", "a"), ("a", "b"), ("=3", "c")],
            r#"{"a":1}} x"#,
            2,
        ),
        (
            "a document with bytes after it, a key added first",
            &[("=3", "c"), ("a", "b")],
            r#"{"a":1} x"#,
            1,
        ),
        (
            "a document cut short of its bracket",
            &[("a", "a"), ("a", "b")],
            r#"{"a":"{\"b\":\"c\"}""#,
            2,
        ),
        (
            "a document with white space around it",
            &[("a", "a"), ("a", "b")],
            " {\"a\":1}\n",
            2,
        ),
        (
            "an insert into a parent that is an array fails, under its id",
            &[("=1", "x"), ("=2", "t.k")],
            r#"{"t":[1]}"#,
            1,
        ),
        (
            "computed values among copies and inserts, as the Zeek mapping has them",
            &[
                ("event.original.uid", "event.id"),
                ("^event.original.uid", "event.hash"),
                ("=\"event\"", "event.kind"),
                ("+[event.original.ts,!1000000000]", "event.duration"),
                ("event.original.proto", "network.transport"),
                (
                    "+[event.original.orig_bytes,event.original.resp_bytes]",
                    "network.bytes",
                ),
            ],
            &wrapped,
            1,
        ),
        (
            "a multipath's members under parents in turn, one missing",
            &[("+[a.x,b.y,a.z,a.q,!2]", "s"), ("^b.y", "u")],
            r#"{"a":{"x":1,"z":3},"b":{"y":10}}"#,
            1,
        ),
        (
            "a multipath none of whose members is there sums to 0",
            &[("+[a.x,b]", "s"), ("c", "d")],
            r#"{"c":1}"#,
            1,
        ),
        (
            "a computed value's missing source writes nothing",
            &[("^a", "x"), ("b", "y")],
            r#"{"b":1}"#,
            1,
        ),
        (
            "a computed value that fails, after writes: its error, their data",
            &[("a", "x"), ("=1", "y"), ("^b", "z"), ("a", "w")],
            r#"{"a":1,"b":"fail"}"#,
            1,
        ),
        (
            "a multipath member that fails",
            &[("^a", "x.a"), ("+[a,b]", "x.s")],
            r#"{"a":1,"b":"fail"}"#,
            1,
        ),
        (
            "a computed value's write that fails, under its id",
            &[("a", "x"), ("^a", "t.k")],
            r#"{"a":"q","t":[1]}"#,
            1,
        ),
        (
            "a computed value of what an earlier member wrote",
            &[("+[a,!1]", "x"), ("^x", "y"), ("+[a,x]", "z")],
            r#"{"a":1}"#,
            2,
        ),
        (
            "a computed value into a key an earlier one read",
            &[("^a", "x"), ("^b", "a"), ("+[b,!1]", "c")],
            r#"{"a":"q","b":"2"}"#,
            1,
        ),
        (
            "computed values on data that is not JSON",
            &[("^a", "x"), ("+[a,b]", "y")],
            "plain text",
            1,
        ),
        (
            "computed values on a document that is an array",
            &[("^a", "x"), ("+[a,b]", "y")],
            "[1,2]",
            1,
        ),
        (
            "computed values on a document with bytes after it",
            &[("^a", "x"), ("+[a,!1]", "y")],
            r#"{"a":"q"} x"#,
            1,
        ),
        (
            "computed values on a document cut short",
            &[("^a", "a"), ("+[c,!1]", "c")],
            r#"{"a":"q","c":1"#,
            1,
        ),
        (
            "a multipath of more parts than a run hands on is not fused",
            &[
                ("+[a,b,c,d,e,f,g,h,!1]", "s"),
                ("a", "x"),
                ("+[a,b,c,d,e,f,g,!1]", "t"),
            ],
            r#"{"a":1,"b":2,"h":8}"#,
            2,
        ),
        (
            "a computed string holding JSON becomes it",
            &[("^a", "x"), ("^b", "y")],
            r#"{"a":"{\"q\":1}","b":"[1]"}"#,
            1,
        ),
    ];
    for (name, copies, data, made) in cases {
        let want = one_by_one(copies, data);
        let (got, steps) = fused(copies, data);
        assert_eq!(got, want, "{name}");
        assert_eq!(steps, *made, "{name}: steps");
    }
    // Written as SJSON writes them, one after another.
    let (got, _) = fused(&[("=2", "a"), ("a", "b"), ("=3", "c")], r#"{"a":1}} x"#);
    assert_eq!(got.as_deref(), Ok(r#"{"a":2},"b":2,"c":3}"#));
    let (got, _) = fused(&[("=3", "c"), ("a", "b")], r#"{"a":1} x"#);
    assert_eq!(got.as_deref(), Ok(r#"{"a":1,"c":3,"b":1}"#));
    // The error case names the copy that failed (the second) and its target.
    let (got, _) = fused(
        &[("a", "x"), ("a", "t.k"), ("a", "t.j")],
        r#"{"a":1,"t":[1]}"#,
    );
    let e = got.expect_err("a key into an array");
    assert!(e.starts_with("transform t1:") && e.contains("t.k"), "{e}");
    // A computation that fails names its step, with the writes before it done.
    let (got, _) = fused(
        &[("a", "x"), ("=1", "y"), ("^b", "z"), ("a", "w")],
        r#"{"a":1,"b":"fail"}"#,
    );
    assert_eq!(
        got.expect_err("upper of fail").as_str(),
        r#"transform t2: upper: cannot | {"a":1,"b":"fail","x":1,"y":1}"#
    );
    // So does an insert's, when it is the first write of the run.
    let (got, _) = fused(&[("a", "x"), ("=1", "y"), ("=2", "z")], "plain text");
    let e = got.expect_err("an insert into text");
    assert!(e.starts_with("transform t1:"), "{e}");
}

/// What a run shares: a parent consecutive reads have (walked once) and the groups of
/// consecutive targets with one parent.
#[test]
fn a_run_walks_each_parent_once() {
    let copies = [
        ("e.o.a", "c.a"),
        ("e.o.b", "c.b"),
        ("e.o.c", "s.a"),
        ("e.o.d", "c.d"),
        ("e.o", "top"),
        ("e.o.x.y", "top2"),
        ("+[e.o.a,e.p,e.o.b]", "sum"),
    ];
    let members = || {
        steps(&copies)
            .into_iter()
            .map(|(id, t)| Member::of(&Step::new(id.into(), t)).unwrap())
            .collect::<Vec<_>>()
    };
    let run = CopyRun::of(members());
    let walks: Vec<bool> = run
        .sources
        .iter()
        .flat_map(|s| match s {
            Source::Key(r) => vec![r.walks_parent],
            Source::Constant(_) => vec![],
            Source::Computed(parts, _) => parts
                .iter()
                .filter_map(|p| match p {
                    Part::Read(r) => Some(r.walks_parent),
                    Part::Literal(_) => None,
                })
                .collect(),
        })
        .collect();
    // e.o: a walked, b c d found under it; e (for e.o); e.o.x; e.o; e (for e.p); e.o.
    assert_eq!(
        walks,
        vec![true, false, false, false, true, true, true, true, true]
    );
    let groups: Vec<Range<usize>> = run.groups.iter().map(|g| g.members.clone()).collect();
    assert_eq!(groups, vec![0..2, 2..3, 3..4, 4..7]);
    assert!(run.groups.iter().all(|g| g.keys_differ));

    let built = fuse(
        steps(&copies)
            .into_iter()
            .map(|(id, t)| Step::new(id.into(), t))
            .collect(),
    );
    assert_eq!(built.len(), 1);
    assert_eq!(&**built[0].name.id(), "t0,t1,t2,t3,t4,t5,t6");
    assert!(built[0].attributes_errors);
    let t = map_of(&built[0].transform);
    let mut msg = Message::new(&br#"{"e":{"o":{"a":1,"b":2,"c":3,"d":4,"x":{"y":5}}}}"#[..]);
    t.map(&mut msg).unwrap();
    assert_eq!(
        &msg.data()[..],
        &br#"{"e":{"o":{"a":1,"b":2,"c":3,"d":4,"x":{"y":5}}},"c":{"a":1,"b":2,"d":4},"s":{"a":3},"top":{"a":1,"b":2,"c":3,"d":4,"x":{"y":5}},"top2":5,"sum":3}"#[..]
    );
}

/// Generated runs of copies, inserts and computed values (keys from a small set, so that
/// reads meet earlier writes, parents are shared and scalars stand where objects are
/// written), over generated documents: the pipeline (runs fused) gives what the steps give
/// one by one, data and errors alike, the data an error leaves included.
#[test]
fn generated_runs_give_what_their_steps_give_one_by_one() {
    const KEYS: &[&str] = &["a", "b", "a.b", "a.c", "b.a", "c.d.e", "x", "x.y"];
    const VALUES: &[&str] = &[
        "1",
        "\"q\"",
        "\"fail\"",
        "null",
        "[1,2]",
        "{\"b\":2}",
        "\"{\\\"k\\\":1}\"",
        "2.5",
    ];
    let mut rng = fastrand::Rng::with_seed(55);
    let key = |rng: &mut fastrand::Rng| KEYS[rng.usize(..KEYS.len())];
    let value = |rng: &mut fastrand::Rng| VALUES[rng.usize(..VALUES.len())];
    let mut fused_steps = 0;
    for _ in 0..3000 {
        let members: Vec<(String, String)> = (0..rng.usize(2..7))
            .map(|_| {
                let source = match rng.u8(..10) {
                    0..=3 => key(&mut rng).to_string(),
                    4 => format!("={}", value(&mut rng)),
                    5 | 6 => format!("^{}", key(&mut rng)),
                    7 => "!null".to_string(),
                    _ => {
                        let parts: Vec<String> = (0..rng.usize(1..4))
                            .map(|_| match rng.u8(..4) {
                                0 => "!3".to_string(),
                                _ => key(&mut rng).to_string(),
                            })
                            .collect();
                        format!("+[{}]", parts.join(","))
                    }
                };
                (source, key(&mut rng).to_string())
            })
            .collect();
        let doc = match rng.u8(..12) {
            0 => "plain text".to_string(),
            1 => "[1,2]".to_string(),
            2 => r#"{"a":1} x"#.to_string(),
            3 => r#"{"a":{"b":"q"}"#.to_string(),
            _ => {
                let entries: Vec<String> = (0..rng.usize(0..4))
                    .map(|_| {
                        let k = ["a", "b", "c", "x"][rng.usize(..4)];
                        let v = match rng.u8(..3) {
                            0 => format!(r#"{{"b":{},"c":{}}}"#, value(&mut rng), value(&mut rng)),
                            _ => value(&mut rng).to_string(),
                        };
                        format!(r#""{k}":{v}"#)
                    })
                    .collect();
                format!("{{{}}}", entries.join(","))
            }
        };
        let copies: Vec<(&str, &str)> = members
            .iter()
            .map(|(s, t)| (s.as_str(), t.as_str()))
            .collect();
        let (got, made) = fused(&copies, &doc);
        assert_eq!(got, one_by_one(&copies, &doc), "{copies:?} on {doc}");
        fused_steps += copies.len() - made;
    }
    // Runs were fused, not every step left alone.
    assert!(fused_steps > 3000, "{fused_steps}");
}
