//! The path language: GJSON for reads, SJSON for writes and deletes.
//!
//! No crate implements GJSON/SJSON semantics faithfully in Rust, and Substation configs
//! depend on them, so the language is written here. Paths are compiled once, when a
//! transform is built (`parse.rs`), and then applied to parsed JSON ([`crate::json::Value`]
//! with key order kept).
//!
//! Reads (`get.rs`): dot paths, `\` escapes, `*`/`?` wildcards, indexes, `#` (length, or a
//! map over the elements when followed by `.`), queries `#(...)` / `#(...)#` (`query.rs`),
//! `|` pipes, multipaths `[a,b]` / `{a,"k":b}`, literals `!json`, and modifiers
//! (`modifiers.rs`). Plain key/index paths borrow from the document and do not allocate.
//!
//! Writes and deletes (`set.rs`): dot paths with `\` escapes, indexes, `-1` (append / last
//! element), `:` to force an object key. Wildcards, `#`, pipes, modifiers, multipaths and
//! literals cannot be written to: `set` and `delete` report [`PathError::Invalid`].

use std::borrow::Cow;

use crate::json::Value;

mod get;
mod modifiers;
mod parse;
mod set;
mod syntax;

/// A path could not be compiled or applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path text is malformed.
    #[error("invalid path {path:?}: {reason}")]
    Invalid {
        /// The path as written.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The path cannot be written to this document.
    #[error("cannot set {path:?}: {reason}")]
    CannotSet {
        /// The path as written.
        path: String,
        /// Why not.
        reason: String,
    },
}

/// A compiled path.
#[derive(Debug, Clone)]
pub struct Path {
    text: String,
    this: bool,
    /// The components for reads.
    comps: Vec<syntax::Comp>,
    /// Plain keys and indexes only: reads walk borrowed values without allocating.
    simple: bool,
    /// The steps for writes and deletes, or why the path cannot be written to.
    write: Result<Vec<syntax::WStep>, String>,
    /// The options of a final `@pretty`: the path then reads as text.
    pretty: Option<crate::json::pretty::PrettyOptions>,
}

/// A part of a read a fused run can do (see [`Path::reads`]).
#[derive(Debug, Clone)]
pub(crate) enum ReadPart {
    /// The value at object keys, when it exists.
    Keys(KeyRead),
    /// A multipath's literal (`!1`): always there.
    Literal(Value),
}

/// A read of object keys only (no index, pipe, wildcard or modifier): its parent walked
/// first, then its last key, so that reads with one parent walk it once.
#[derive(Debug, Clone)]
pub(crate) struct KeyRead {
    comps: Vec<syntax::Comp>,
    keys: Vec<String>,
}

impl KeyRead {
    /// The read of `comps`, when they are one or more object keys.
    fn of(comps: &[syntax::Comp]) -> Option<KeyRead> {
        let keys = comps
            .iter()
            .map(|c| match &c.kind {
                syntax::Kind::Key {
                    name, index: None, ..
                } if !c.pipe => Some(name.to_string()),
                _ => None,
            })
            .collect::<Option<Vec<String>>>()?;
        if keys.is_empty() {
            return None;
        }
        Some(KeyRead {
            comps: comps.to_vec(),
            keys,
        })
    }

    /// The keys, in order.
    pub(crate) fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The keys before the last.
    pub(crate) fn parent_keys(&self) -> &[String] {
        &self.keys[..self.keys.len() - 1]
    }

    /// The value at the keys before the last in `doc`.
    #[inline]
    pub(crate) fn parent<'v>(&self, doc: &'v Value) -> Option<&'v Value> {
        get::walk(&self.comps[..self.comps.len() - 1], doc)
    }

    /// The value at the last key under `parent` (from [`KeyRead::parent`] of a read with
    /// the same keys before the last).
    #[inline]
    pub(crate) fn in_parent<'v>(&self, parent: &'v Value) -> Option<&'v Value> {
        get::walk(&self.comps[self.comps.len() - 1..], parent)
    }
}

/// Where a write meets the top of a document (see [`Path::top_write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TopWrite {
    /// At a key or index the document has.
    Inside,
    /// A member added to the object, an element appended to the array.
    Added,
    /// The array written anew (an index past its end), or what [`Path::set`] refuses.
    Anew,
}

impl Path {
    /// Compiles a path. The empty path and `@this` address the whole document.
    pub fn parse(text: &str) -> Result<Path, PathError> {
        let this = text.is_empty() || text == "@this";
        let comps = parse::parse_read(text).map_err(|reason| PathError::Invalid {
            path: text.to_string(),
            reason,
        })?;
        let simple = parse::keys_only(&comps);
        let write = if this {
            Ok(Vec::new())
        } else {
            parse::parse_write(text)
        };
        let pretty = match comps.last().map(|c| &c.kind) {
            Some(syntax::Kind::Modifier(m)) => match m.as_ref() {
                syntax::Modifier::Pretty(opts) => Some(opts.clone()),
                _ => None,
            },
            _ => None,
        };
        Ok(Path {
            text: text.to_string(),
            this,
            comps,
            simple,
            write,
            pretty,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether it addresses the whole document.
    pub fn is_this(&self) -> bool {
        self.this
    }

    /// Reads the value at the path (GJSON semantics). `None` when it does not exist.
    ///
    /// A path that ends with `@pretty` reads an object or array as its pretty text, laid
    /// out as GJSON lays it out (a string here; GJSON's result is that text): what a config
    /// that copies `@pretty` into the data prints. Written back as a value, `SetValue`'s
    /// typing makes it the object again.
    pub fn get<'a>(&self, doc: &'a Value) -> Option<Cow<'a, Value>> {
        let v = self.get_value(doc)?;
        match &self.pretty {
            Some(opts) if matches!(v.as_ref(), Value::Object(_) | Value::Array(_)) => {
                let text = crate::json::pretty::to_pretty(&v, opts);
                Some(Cow::Owned(Value::String(
                    String::from_utf8(text).unwrap_or_default().into(),
                )))
            }
            _ => Some(v),
        }
    }

    /// For a path that is one array multipath and nothing else (`[a.b,c,!1]`): the value of
    /// each member that exists in `doc`, in order, borrowed where it can be. These are the
    /// elements of the array [`Path::get`] gives, read without building it. `None` for any
    /// other path.
    pub fn multi_values<'a>(
        &'a self,
        doc: &'a Value,
    ) -> Option<impl Iterator<Item = Cow<'a, Value>> + 'a> {
        let members = self.array_multi_members()?;
        Some(members.iter().filter_map(move |m| get::member_in(m, doc)))
    }

    /// Whether [`Path::multi_values`] reads this path.
    pub fn is_array_multi(&self) -> bool {
        self.array_multi_members().is_some()
    }

    /// The members of a path that is one array multipath and nothing else.
    fn array_multi_members(&self) -> Option<&[syntax::Member]> {
        if self.this || self.pretty.is_some() {
            return None;
        }
        get::array_multi(&self.comps)
    }

    fn get_value<'a>(&self, doc: &'a Value) -> Option<Cow<'a, Value>> {
        if self.this {
            return Some(Cow::Borrowed(doc));
        }
        if self.simple {
            return get::walk(&self.comps, doc).map(Cow::Borrowed);
        }
        get::eval(&self.comps, Cow::Borrowed(doc))
    }

    /// Writes `v` at the path (SJSON semantics), creating intermediate objects.
    #[inline]
    pub fn set(&self, doc: &mut Value, v: Value) -> Result<(), PathError> {
        if self.this {
            *doc = v;
            return Ok(());
        }
        let steps = self.write_steps()?;
        set::set(steps, doc, v).map_err(|reason| self.cannot_set(reason))
    }

    /// Deletes the value at the path; `false` when nothing was there.
    pub fn delete(&self, doc: &mut Value) -> Result<bool, PathError> {
        if self.this {
            *doc = Value::Null;
            return Ok(true);
        }
        Ok(set::delete(self.write_steps()?, doc))
    }

    /// Where a write at this path meets the top of `doc`, an object or array: at a key or
    /// index `doc` has ([`TopWrite::Inside`]), as a member added to the object or an
    /// element appended to the array ([`TopWrite::Added`]), or past the array's end, which
    /// SJSON writes anew ([`TopWrite::Anew`]; so too anything else, which [`Path::set`]
    /// settles). What a framed document's bytes around the value depend on.
    pub(crate) fn top_write(&self, doc: &Value) -> Result<TopWrite, PathError> {
        let Some(first) = self.write_steps()?.first() else {
            return Ok(TopWrite::Anew);
        };
        Ok(match doc {
            Value::Object(m) if m.get(&first.name).is_some() => TopWrite::Inside,
            Value::Object(_) => TopWrite::Added,
            Value::Array(_) if first.append => TopWrite::Added,
            Value::Array(a) if first.index.is_some_and(|i| i < a.len()) => TopWrite::Inside,
            _ => TopWrite::Anew,
        })
    }

    /// The keys of a path made of object keys only (no index, no `-1`, no `|`, no
    /// modifier), the same for reading and for writing; `None` for any other path. What a
    /// fused run (`pipeline/copy_run.rs`) compares to write into a shared parent once.
    pub(crate) fn object_keys(&self) -> Option<Vec<&str>> {
        if self.this || !self.simple || self.pretty.is_some() {
            return None;
        }
        let steps = self.write.as_deref().ok()?;
        if steps.len() != self.comps.len() {
            return None;
        }
        self.comps
            .iter()
            .zip(steps)
            .map(|(c, w)| match &c.kind {
                syntax::Kind::Key {
                    name, index: None, ..
                } if !c.pipe && w.index.is_none() && !w.append && w.name == **name => Some(&**name),
                _ => None,
            })
            .collect()
    }

    /// What a read of this path is, for a fused run (`pipeline/copy_run.rs`): one read of
    /// object keys for a path of [`Path::object_keys`]; for a path that is one array
    /// multipath and nothing else, its members in order, each a read of object keys or a
    /// literal (`[a.b,c,!1]`); `None` for any other path, or a multipath with another
    /// member. The values these give, those that exist, are what [`Path::get`] reads (or,
    /// for the multipath, [`Path::multi_values`]).
    pub(crate) fn reads(&self) -> Option<Vec<ReadPart>> {
        if self.object_keys().is_some() {
            return Some(vec![ReadPart::Keys(KeyRead::of(&self.comps)?)]);
        }
        self.array_multi_members()?
            .iter()
            .map(|m| match m.comps.as_slice() {
                [
                    syntax::Comp {
                        kind: syntax::Kind::Literal(v),
                        pipe: false,
                    },
                ] => Some(ReadPart::Literal(Value::clone(v))),
                comps if m.keys_only => KeyRead::of(comps).map(ReadPart::Keys),
                _ => None,
            })
            .collect()
    }

    /// The value this path's last key is written into, created on the way as
    /// [`Path::set`] creates it, and made what the write finds or creates there (a null
    /// becomes an empty object, see `set::make_container`): to be called only for a value
    /// about to be written. For a path of [`Path::object_keys`]: with
    /// [`Path::set_in_parent`], the same as [`Path::set`], errors included.
    pub(crate) fn parent_mut<'v>(&self, doc: &'v mut Value) -> Result<&'v mut Value, PathError> {
        let steps = self.write_steps()?;
        let Some((last, parents)) = steps.split_last() else {
            return Ok(doc);
        };
        let parent = set::parent(parents, doc).map_err(|reason| self.cannot_set(reason))?;
        set::make_container(parent, last, parents.len());
        Ok(parent)
    }

    /// Writes `v` at this path's last key in `parent` (from [`Path::parent_mut`] of this
    /// path or of one with the same keys before the last).
    #[inline]
    pub(crate) fn set_in_parent(&self, parent: &mut Value, v: Value) -> Result<(), PathError> {
        let steps = self.write_steps()?;
        let (last, parents) = steps
            .split_last()
            .ok_or_else(|| self.cannot_set("the path has no key".into()))?;
        set::place(parent, last, parents.len(), v).map_err(|reason| self.cannot_set(reason))
    }

    /// Writes `v` at this path's last key in `parent`, which the caller knows does not
    /// hold that key: an object [`Map::is_blank`](crate::json::Map) when the writes into
    /// it began, each of a different key. The same as [`Path::set_in_parent`] then, with
    /// no lookup.
    #[inline]
    pub(crate) fn set_absent_in(
        &self,
        parent: &mut crate::json::Map,
        v: Value,
    ) -> Result<(), PathError> {
        let steps = self.write_steps()?;
        let last = steps
            .last()
            .ok_or_else(|| self.cannot_set("the path has no key".into()))?;
        set::place_absent(parent, last, v);
        Ok(())
    }

    /// Why a write at this path failed, with the path.
    fn cannot_set(&self, reason: String) -> PathError {
        PathError::CannotSet {
            path: self.text.clone(),
            reason,
        }
    }

    fn write_steps(&self) -> Result<&[syntax::WStep], PathError> {
        self.write.as_deref().map_err(|reason| PathError::Invalid {
            path: self.text.clone(),
            reason: reason.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
