//! Consecutive copies, inserts and computed values run as one step.
//!
//! A mapping such as Zeek → ECS is mostly `object_copy` after `object_copy`: a dozen values
//! read from under one object (`event.original.*`) and written a few at a time into others
//! (`client.*`, `server.*`), with `object_insert`s of constants (`event.kind`,
//! `event.category`) and transforms that compute one value from what they read
//! (`string_to_lower`, `number_math_*`, `time_*`: [`MapPlan::Compute`]) among them. Run one
//! by one, every step walks its source from the top of the document, and every write its
//! target's parent from the top again. Here a run of them is one step: every value is read
//! (a parent shared by consecutive reads walked once) and computed, and then the values are
//! written in order, each group of consecutive targets with one parent into that parent,
//! found (or created) once. An insert is a copy whose value is a constant: it reads
//! nothing, so it never ends a run.
//!
//! The result is that of the steps one after another. The values are read before any is
//! written only where no write can change what a later member reads: each target and every
//! later read at a key where both name different members of one object. A member that reads
//! what an earlier write could reach starts a new run. A failed write is its own step's
//! error, under its own id; so is a failed computation, for which (and for data that is not
//! a plain JSON document) the run does its members one after another instead. Only paths of
//! object keys (no index, `-1`, `|` or modifier) into the data are fused, and multipaths of
//! them and literals as a computed value's source.

use std::ops::Range;
use std::sync::Arc;

use super::Step;
use crate::error::TransformError;
use crate::json::Value;
use crate::message::{Key, Message, Target};
use crate::name::TransformName;
use crate::path::{KeyRead, ReadPart};
use crate::transform::{Compute, InPlace, MapPlan, MapTransform, Transform};

/// Up to how many members' values a run keeps on the stack while it writes them (a
/// longer run keeps them in a `Vec`): a plain array, indexed with no more than a bounds
/// check, and made with no copy (a `SmallVec` of as many cost an event of the Zeek mapping
/// ~450 instructions in copies of its inline room and ~400 in checks whether it had spilled).
const VALUES_ON_STACK: usize = 16;

/// The most parts (keys and literals) a computed value's source may have to join a run:
/// the values it reads are handed on in an array of this many.
const MAX_PARTS: usize = 8;

/// Copies, inserts and computed values run as one step (see the module comment).
pub(super) struct CopyRun {
    /// Each member's step name, for its errors.
    names: Vec<TransformName>,
    /// Each member's transform, for a run done one member after another.
    transforms: Vec<Arc<dyn MapTransform>>,
    sources: Vec<Source>,
    targets: Vec<Key>,
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
    Key(Read),
    /// A constant (`object_insert`).
    Constant(Value),
    /// What a transform computes from the values it reads ([`MapPlan::Compute`]).
    Computed(Vec<Part>, Arc<dyn Compute>),
}

/// A read of object keys in a run.
struct Read {
    at: KeyRead,
    /// Whether its parent is not the last read's (in the run's order), so is walked to.
    walks_parent: bool,
}

/// A part of a computed value's source.
enum Part {
    Read(Read),
    Literal(Value),
}

/// A member's source as planned, before the run orders its reads.
enum Planned {
    Key(KeyRead),
    Constant(Value),
    Computed(Vec<ReadPart>, Arc<dyn Compute>),
}

/// A copy, insert or computed value as the run sees it: its step, source, target and their
/// keys.
struct Member {
    name: TransformName,
    transform: Arc<dyn MapTransform>,
    source: Planned,
    target: Key,
    target_keys: Vec<String>,
}

impl Member {
    /// The member `step` makes, when it is one that can join a run.
    fn of(step: &Step) -> Option<Member> {
        let Transform::Map(transform, plan) = &step.transform else {
            return None;
        };
        let read_of = |from: &Key| -> Option<Vec<ReadPart>> {
            if from.target() != Target::Data {
                return None;
            }
            from.path().reads()
        };
        let (source, target) = match &**plan {
            MapPlan::Copy { from, to } => match read_of(from)?.as_slice() {
                [ReadPart::Keys(at)] => (Planned::Key(at.clone()), to),
                _ => return None,
            },
            MapPlan::Insert { value, to } => (Planned::Constant(value.clone()), to),
            MapPlan::Compute { from, to, compute } => {
                let parts = read_of(from)?;
                if parts.len() > MAX_PARTS {
                    return None;
                }
                (Planned::Computed(parts, compute.clone()), to)
            }
            MapPlan::Opaque => return None,
        };
        if target.target() != Target::Data {
            return None;
        }
        let target_keys: Vec<String> = target
            .path()
            .object_keys()?
            .into_iter()
            .map(str::to_string)
            .collect();
        if target_keys.is_empty() {
            return None;
        }
        Some(Member {
            name: step.name.clone(),
            transform: transform.clone(),
            source,
            target: target.clone(),
            target_keys,
        })
    }

    /// Whether what this member reads cannot be changed by `earlier`'s write: every key it
    /// reads is apart from `earlier`'s target.
    fn reads_apart_from(&self, earlier: &Member) -> bool {
        let apart_from = |at: &KeyRead| apart(&earlier.target_keys, at.keys());
        match &self.source {
            Planned::Key(at) => apart_from(at),
            Planned::Constant(_) => true,
            Planned::Computed(parts, _) => parts.iter().all(|p| match p {
                ReadPart::Keys(at) => apart_from(at),
                ReadPart::Literal(_) => true,
            }),
        }
    }
}

/// Whether a write at `target` cannot change what a read at `source` finds: at some place
/// their keys differ, so below the same object they go to different members (or, below
/// anything else, a read finds nothing before and after).
fn apart(target: &[String], source: &[String]) -> bool {
    target.iter().zip(source).any(|(t, s)| t != s)
}

/// `steps` with each run of two or more consecutive members that can be fused made one
/// step.
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
    /// The run of `members` (two or more, each read apart from every earlier target).
    fn of(members: Vec<Member>) -> CopyRun {
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
            transforms: Vec::with_capacity(members.len()),
            sources: Vec::with_capacity(members.len()),
            targets: Vec::with_capacity(members.len()),
            groups,
        };
        // The parent of the read before, in the run's order: a read with the same one
        // finds its value under the parent that read found.
        let mut last_parent: Option<Vec<String>> = None;
        let mut read = |at: KeyRead| {
            let walks_parent = last_parent.as_deref() != Some(at.parent_keys());
            if walks_parent {
                last_parent = Some(at.parent_keys().to_vec());
            }
            Read { at, walks_parent }
        };
        for m in members {
            run.names.push(m.name);
            run.transforms.push(m.transform);
            run.sources.push(match m.source {
                Planned::Key(at) => Source::Key(read(at)),
                Planned::Constant(v) => Source::Constant(v),
                Planned::Computed(parts, compute) => {
                    let parts = parts
                        .into_iter()
                        .map(|p| match p {
                            ReadPart::Keys(at) => Part::Read(read(at)),
                            ReadPart::Literal(v) => Part::Literal(v),
                        })
                        .collect();
                    Source::Computed(parts, compute)
                }
            });
            run.targets.push(m.target);
        }
        run
    }

    /// Every member's value into `values`, one a member (`None` where its source does not
    /// exist or it computes none), each parent shared by consecutive reads walked once; the
    /// first failed computation's error.
    fn read(&self, doc: &Value, values: &mut [Option<Value>]) -> Result<(), TransformError> {
        let mut parent: Option<&Value> = None;
        let mut find = |r: &Read| {
            if r.walks_parent {
                parent = r.at.parent(doc);
            }
            parent.and_then(|p| r.at.in_parent(p))
        };
        for (s, value) in self.sources.iter().zip(values) {
            *value = match s {
                Source::Key(r) => find(r).cloned(),
                Source::Constant(v) => Some(v.clone()),
                Source::Computed(parts, compute) => {
                    // The values found, in order (`doc` fills the places not used).
                    let mut read = [doc; MAX_PARTS];
                    let mut n = 0;
                    for p in parts {
                        let v = match p {
                            Part::Read(r) => find(r),
                            Part::Literal(v) => Some(v),
                        };
                        // Never past the array: a source of more parts is not fused.
                        if let (Some(v), Some(slot)) = (v, read.get_mut(n)) {
                            *slot = v;
                            n += 1;
                        }
                    }
                    compute.compute(&read[..n])?
                }
            };
        }
        Ok(())
    }

    /// The run on a plain JSON document, with room for its values.
    fn read_and_write(
        &self,
        msg: &mut Message,
        values: &mut [Option<Value>],
    ) -> Result<InPlace, TransformError> {
        let Some(Ok(())) = msg.data_value().map(|doc| self.read(doc, values)) else {
            return self.one_by_one(msg);
        };
        for group in &self.groups {
            self.write(msg, group, values)?;
        }
        Ok(InPlace::Keep)
    }

    /// The members one after another, each as its own step runs it: for data that is not
    /// a plain JSON document (a document framed by bytes that a write keeps or drops as it
    /// meets the top, `{"a":1} x`, or no JSON at all), so that each write sees the data the
    /// one before it left; and for a run whose computation failed, so that the error comes
    /// with the data as the steps before it left it.
    fn one_by_one(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        for (t, name) in self.transforms.iter().zip(&self.names) {
            if t.map(msg).map_err(|e| e.within(name))? == InPlace::Drop {
                return Ok(InPlace::Drop);
            }
        }
        Ok(InPlace::Keep)
    }

    /// Writes the values of `group` that exist, in order, into their parent.
    fn write(
        &self,
        msg: &mut Message,
        group: &Group,
        values: &mut [Option<Value>],
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
        let n = self.sources.len();
        // Room for a few more than the members, not for sixteen: each place is set and
        // dropped.
        if n <= 4 {
            let mut values: [Option<Value>; 4] = Default::default();
            self.read_and_write(msg, &mut values[..n])
        } else if n <= VALUES_ON_STACK {
            let mut values: [Option<Value>; VALUES_ON_STACK] = Default::default();
            self.read_and_write(msg, &mut values[..n])
        } else {
            let mut values = vec![None; n];
            self.read_and_write(msg, &mut values)
        }
    }
}

#[cfg(test)]
mod tests;
