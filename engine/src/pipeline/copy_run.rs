//! Consecutive copies and inserts run as one step.
//!
//! A mapping such as Zeek → ECS is mostly `object_copy` after `object_copy`: a dozen values
//! read from under one object (`event.original.*`) and written a few at a time into others
//! (`client.*`, `server.*`), with `object_insert`s of constants (`event.kind`,
//! `event.category`) among them. Run one by one, every copy walks its source from the top
//! of the document, and every write its target's parent from the top again. Here a run of
//! them is one step: the beginning the sources share is walked once, every value is read,
//! and then the values are written in order, each group of consecutive targets with one
//! parent into that parent, found (or created) once. An insert is a copy whose value is a
//! constant: it reads nothing, so it never ends a run.
//!
//! The result is that of the steps one after another. The values are read before any is
//! written only where no write can change what a later copy reads: each target and every
//! later source part at a key where both name different members of one object. A copy whose
//! source an earlier write could reach starts a new run. A failed write is its own step's
//! error, under its own id. Only paths of object keys (no index, `-1`, `|` or modifier) into
//! the data are fused.

use std::ops::Range;
use std::sync::Arc;

use smallvec::SmallVec;

use super::Step;
use crate::error::TransformError;
use crate::json::Value;
use crate::message::{Key, Message, Target};
use crate::name::TransformName;
use crate::transform::{InPlace, MapPlan, MapTransform, Transform};

/// The values of one run's members, read before they are written.
type Values = SmallVec<[Option<Value>; 16]>;

/// Copies and inserts run as one step (see the module comment).
pub(super) struct CopyRun {
    /// Each member's step name, for its errors.
    names: Vec<TransformName>,
    sources: Vec<Source>,
    targets: Vec<Key>,
    /// The first key read (none when all are constants): its first `shared` keys are the
    /// beginning every key read shares, walked once.
    first_read: Option<Key>,
    /// How many keys all sources that are keys begin with in common.
    shared: usize,
    /// Consecutive members whose targets have the same keys before their last.
    groups: Vec<Group>,
}

/// Consecutive members of a run whose targets have one parent, written into it together.
#[derive(Debug, PartialEq)]
struct Group {
    members: Range<usize>,
    /// Whether their targets' last keys all differ: written into a parent the run has just
    /// created (an object with no keys), none can meet another's key or one that was there,
    /// so each is added with no lookup.
    keys_differ: bool,
}

/// Where a member's value comes from.
enum Source {
    /// The value at a key, when it exists (`object_copy`).
    Key(Key),
    /// A constant (`object_insert`).
    Constant(Value),
}

/// A copy or insert as the run sees it: its step, source, target and their keys.
struct Member {
    name: TransformName,
    source: Source,
    target: Key,
    /// The source's keys; empty for a constant.
    source_keys: Vec<String>,
    target_keys: Vec<String>,
}

impl Member {
    /// The copy or insert `step` makes, when it is one that can join a run.
    fn of(step: &Step) -> Option<Member> {
        let Transform::Map(_, plan) = &step.transform else {
            return None;
        };
        let owned =
            |keys: Vec<&str>| -> Vec<String> { keys.into_iter().map(str::to_string).collect() };
        let (source, source_keys, target) = match &**plan {
            MapPlan::Copy { from, to } => {
                if from.target() != Target::Data {
                    return None;
                }
                let keys = owned(from.path().object_keys()?);
                if keys.is_empty() {
                    return None;
                }
                (Source::Key(from.clone()), keys, to)
            }
            MapPlan::Insert { value, to } => (Source::Constant(value.clone()), Vec::new(), to),
            MapPlan::Opaque => return None,
        };
        if target.target() != Target::Data {
            return None;
        }
        let target_keys = owned(target.path().object_keys()?);
        if target_keys.is_empty() {
            return None;
        }
        Some(Member {
            name: step.name.clone(),
            source,
            target: target.clone(),
            source_keys,
            target_keys,
        })
    }

    /// The key it reads; `None` for a constant.
    fn read_key(&self) -> Option<&Key> {
        match &self.source {
            Source::Key(k) => Some(k),
            Source::Constant(_) => None,
        }
    }

    /// Whether what this member reads cannot be changed by `earlier`'s write: it reads a
    /// constant, or a key apart from `earlier`'s target.
    fn reads_apart_from(&self, earlier: &Member) -> bool {
        self.read_key().is_none() || apart(&earlier.target_keys, &self.source_keys)
    }
}

/// Whether a write at `target` cannot change what a read at `source` finds: at some place
/// their keys differ, so below the same object they go to different members (or, below
/// anything else, a read finds nothing before and after).
fn apart(target: &[String], source: &[String]) -> bool {
    target.iter().zip(source).any(|(t, s)| t != s)
}

/// `steps` with each run of two or more consecutive copies and inserts that can be fused made
/// one step.
pub(super) fn fuse(steps: Vec<Step>) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    let mut run: Vec<(Step, Member)> = Vec::new();
    for step in steps {
        match Member::of(&step) {
            Some(m) if run.iter().all(|(_, earlier)| m.reads_apart_from(earlier)) => {
                run.push((step, m));
            }
            Some(m) => {
                close(&mut run, &mut out);
                run.push((step, m));
            }
            None => {
                close(&mut run, &mut out);
                out.push(step);
            }
        }
    }
    close(&mut run, &mut out);
    out
}

/// Hands on the members of `run`: as they are when there is one, else as one step.
fn close(run: &mut Vec<(Step, Member)>, out: &mut Vec<Step>) {
    if run.len() < 2 {
        out.extend(run.drain(..).map(|(step, _)| step));
        return;
    }
    let members: Vec<Member> = run.drain(..).map(|(_, m)| m).collect();
    let id: Arc<str> = members
        .iter()
        .map(|m| &**m.name.id())
        .collect::<Vec<_>>()
        .join(",")
        .into();
    out.push(Step {
        name: TransformName::from(id),
        transform: Transform::map(CopyRun::of(members)),
        attributes_errors: true,
        fails_alone: false,
    });
}

impl CopyRun {
    /// The run of `members` (two or more, each source apart from every earlier target).
    fn of(members: Vec<Member>) -> CopyRun {
        let reads = || members.iter().filter(|m| m.read_key().is_some());
        let first_read = reads().next();
        // Each source is read below what they share: at least its last key is its own.
        let shared = match first_read {
            None => 0,
            Some(f) => {
                let first = &f.source_keys;
                (0..first.len())
                    .take_while(|&i| {
                        reads().all(|m| i + 1 < m.source_keys.len() && m.source_keys[i] == first[i])
                    })
                    .count()
            }
        };
        fn parent(m: &Member) -> &[String] {
            &m.target_keys[..m.target_keys.len() - 1]
        }
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for (i, m) in members.iter().enumerate() {
            match ranges.last_mut() {
                Some(g) if parent(&members[g.start]) == parent(m) => g.end = i + 1,
                _ => ranges.push(i..i + 1),
            }
        }
        let last_key = |i: usize| members[i].target_keys.last();
        let groups = ranges
            .into_iter()
            .map(|r| Group {
                keys_differ: r
                    .clone()
                    .all(|i| (r.start..i).all(|j| last_key(j) != last_key(i))),
                members: r,
            })
            .collect();
        let mut run = CopyRun {
            names: Vec::with_capacity(members.len()),
            sources: Vec::with_capacity(members.len()),
            targets: Vec::with_capacity(members.len()),
            first_read: first_read.and_then(Member::read_key).cloned(),
            shared,
            groups,
        };
        for m in members {
            run.names.push(m.name);
            run.sources.push(m.source);
            run.targets.push(m.target);
        }
        run
    }

    /// Every source's value (`None` where it does not exist), the shared keys walked once.
    fn read(&self, msg: &Message) -> Values {
        let base = self.first_read.as_ref().and_then(|first| {
            msg.data_value()
                .and_then(|doc| first.path().get_keys_to(self.shared, doc))
        });
        self.sources
            .iter()
            .map(|s| match s {
                Source::Key(k) => base
                    .and_then(|b| k.path().get_keys_from(self.shared, b))
                    .cloned(),
                Source::Constant(v) => Some(v.clone()),
            })
            .collect()
    }

    /// The members one after another, each as its own step runs it: for a document framed
    /// by bytes that a write keeps or drops as it meets the top (`{"a":1} x`), so that
    /// each write sees the data the one before it left.
    fn one_by_one(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        for (i, target) in self.targets.iter().enumerate() {
            let v = match &self.sources[i] {
                Source::Key(k) => msg.get(k).map(std::borrow::Cow::into_owned),
                Source::Constant(v) => Some(v.clone()),
            };
            if let Some(v) = v {
                msg.set(target, v).map_err(|e| e.within(&self.names[i]))?;
            }
        }
        Ok(InPlace::Keep)
    }

    /// Writes the values of `group` that exist, in order, into their parent.
    fn write(
        &self,
        msg: &mut Message,
        group: &Group,
        values: &mut Values,
    ) -> Result<(), TransformError> {
        let Some(first) = group.members.clone().find(|&i| values[i].is_some()) else {
            return Ok(());
        };
        let fail = |i: usize| {
            let name = &self.names[i];
            move |e: TransformError| e.within(name)
        };
        let doc = msg.data_value_mut().map_err(fail(first))?;
        let parent = self.targets[first]
            .path()
            .parent_mut(doc)
            .map_err(|e| fail(first)(e.into()))?;
        let values = values[first..group.members.end].iter_mut().enumerate();
        let taken = values.filter_map(|(i, v)| Some((first + i, v.take()?)));
        // Two loops, one per kind of parent, not one with the choice inside: written as
        // one, the choice made in every iteration cost Zeek ~270 instructions an event.
        match parent {
            Value::Object(m) if group.keys_differ && m.is_blank() => {
                for (i, mut v) in taken {
                    crate::value::sjson_type(&mut v);
                    self.targets[i]
                        .path()
                        .set_absent_in(m, v)
                        .map_err(|e| fail(i)(e.into()))?;
                }
            }
            parent => {
                for (i, mut v) in taken {
                    crate::value::sjson_type(&mut v);
                    self.targets[i]
                        .path()
                        .set_in_parent(parent, v)
                        .map_err(|e| fail(i)(e.into()))?;
                }
            }
        }
        Ok(())
    }
}

impl MapTransform for CopyRun {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        if msg.is_ctrl() {
            return Ok(InPlace::Keep);
        }
        if msg.data_body().is_framed() {
            return self.one_by_one(msg);
        }
        let mut values = self.read(msg);
        for group in &self.groups {
            self.write(msg, group, &mut values)?;
        }
        Ok(InPlace::Keep)
    }
}

#[cfg(test)]
mod tests {
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
    /// [`Null`] at the target, one of `=` and JSON an [`Insert`] of that JSON.
    fn steps(copies: &[(&str, &str)]) -> Vec<(Arc<str>, Transform)> {
        copies
            .iter()
            .enumerate()
            .map(|(i, (s, t))| {
                let t = match *s {
                    "!null" => Transform::map(Null(Key::parse(t).unwrap())),
                    s if s.starts_with('=') => insert(&s[1..], t),
                    s => copy(s, t),
                };
                (Arc::from(format!("t{i}")), t)
            })
            .collect()
    }

    /// The data after each step's `map` one after another, or the first error.
    fn one_by_one(copies: &[(&str, &str)], data: &str) -> Result<String, String> {
        let mut msg = Message::new(data.as_bytes().to_vec());
        for (id, t) in steps(copies) {
            map_of(&t)
                .map(&mut msg)
                .map_err(|e| e.within(&TransformName::from(id)).to_string())?;
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
            Err(e) => Err(e.to_string()),
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
        // So does an insert's, when it is the first write of the run.
        let (got, _) = fused(&[("a", "x"), ("=1", "y"), ("=2", "z")], "plain text");
        let e = got.expect_err("an insert into text");
        assert!(e.starts_with("transform t1:"), "{e}");
    }

    /// What a run shares: the sources' common beginning (never a whole source) and the
    /// groups of consecutive targets with one parent.
    #[test]
    fn a_run_walks_the_shared_beginning_once_and_each_parent_once() {
        let copies = [
            ("e.o.a", "c.a"),
            ("e.o.b", "c.b"),
            ("e.o.c", "s.a"),
            ("e.o.d", "c.d"),
            ("e.o", "top"),
            ("e.o.x.y", "top2"),
        ];
        let members = || {
            steps(&copies)
                .into_iter()
                .map(|(id, t)| Member::of(&Step::new(id.into(), t)).unwrap())
                .collect::<Vec<_>>()
        };
        let run = CopyRun::of(members());
        // `e.o` is a whole source: only `e` is walked once.
        assert_eq!(run.shared, 1);
        let groups: Vec<Range<usize>> = run.groups.iter().map(|g| g.members.clone()).collect();
        assert_eq!(groups, vec![0..2, 2..3, 3..4, 4..6]);
        assert!(run.groups.iter().all(|g| g.keys_differ));
        let run = CopyRun::of(members().into_iter().take(4).collect());
        assert_eq!(run.shared, 2);

        let built = fuse(
            steps(&copies)
                .into_iter()
                .map(|(id, t)| Step::new(id.into(), t))
                .collect(),
        );
        assert_eq!(built.len(), 1);
        assert_eq!(&**built[0].name.id(), "t0,t1,t2,t3,t4,t5");
        assert!(built[0].attributes_errors);
        let t = map_of(&built[0].transform);
        let mut msg = Message::new(&br#"{"e":{"o":{"a":1,"b":2,"c":3,"d":4,"x":{"y":5}}}}"#[..]);
        t.map(&mut msg).unwrap();
        assert_eq!(
            &msg.data()[..],
            &br#"{"e":{"o":{"a":1,"b":2,"c":3,"d":4,"x":{"y":5}}},"c":{"a":1,"b":2,"d":4},"s":{"a":3},"top":{"a":1,"b":2,"c":3,"d":4,"x":{"y":5}},"top2":5}"#[..]
        );
    }
}
