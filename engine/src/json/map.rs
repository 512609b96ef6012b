//! [`Map`], the JSON object: keys inline, in insertion order, found by comparing one-word
//! tags while the object is small and through a hash index once it is large. An object
//! parsed from text also keeps that text, and once it changes, which of its members changed,
//! so it is written back as Substation's SJSON, which edits the text in place, would leave
//! it (`parse.rs`, `splice.rs`). An object inside a document is left unread by the reader
//! until it is used: every method reads it first, those taking `&self` into a reading kept
//! beside its text, those taking `&mut self` into its own entries. [`ObjectBuilder`] builds
//! one as a reader reads it.

use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;
use compact_str::CompactString;

use super::Value;
use super::parse::Unread;
use super::splice::{Member, State};

type Hasher = foldhash::fast::RandomState;

/// A JSON object: keys in insertion order.
///
/// Most objects in log events are small, so entries are kept in a `Vec` and found by
/// comparing keys; an object that grows past [`INDEX_FROM`] keys also gets a hash index, so
/// large objects stay fast too.
#[derive(Clone, Default)]
pub struct Map {
    pub(super) entries: Vec<Slot>,
    // Boxed so that an object (small, and built by a transform, in the common case) stays
    // three words plus a pointer: a `Value` is four words.
    pub(super) extra: Option<Box<Extra>>,
}

impl Drop for Map {
    /// Drops what the entries own (a key or string past 24 bytes, an array, an object), in
    /// a loop over all of them, then the entries' block is freed. The drop glue called the
    /// drop of every value, numbers and short strings too, a call each: 40 an event on the
    /// Zeek mapping, most of the time of freeing a document.
    fn drop(&mut self) {
        let len = self.entries.len();
        let at = self.entries.as_mut_ptr();
        // SAFETY: the entries' length is set to zero first, so the `Vec` neither drops nor
        // hands out any of them again (should a drop below panic, the rest are leaked, which
        // is safe); each of the `len` initialised entries below is visited once, and each
        // of its fields dropped in place at most once. A field left alone owns nothing to
        // free: a tag, a key or string kept inline (their drop does nothing then), null, a
        // boolean, a number (no drop at all: a test checks).
        unsafe {
            self.entries.set_len(0);
            for e in std::slice::from_raw_parts_mut(at, len) {
                if e.key.is_heap_allocated() {
                    std::ptr::drop_in_place(&mut e.key);
                }
                match &mut e.value {
                    Value::Object(m) => std::ptr::drop_in_place(m),
                    Value::Array(a) => std::ptr::drop_in_place(a),
                    Value::String(s) if s.is_heap_allocated() => std::ptr::drop_in_place(s),
                    Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
                }
            }
        }
    }
}

/// What only some objects have: the hash index of a large one, the text of a parsed one,
/// and, for one not read yet, its reading (its entries are then empty).
#[derive(Clone, Default)]
pub(super) struct Extra {
    pub(super) index: Option<HashMap<CompactString, usize, Hasher>>,
    pub(super) text: Option<Text>,
    unread: Option<Unread<Map>>,
}

/// The JSON text an object was parsed from, and what changed since. Every method that can
/// change the object (each one taking `&mut self`) records it first, in `members`, or
/// drops the text where SJSON could not have made the change (keys sorted, say).
#[derive(Clone)]
pub(super) struct Text {
    pub(super) bytes: Bytes,
    /// Where its members are in `bytes` and what became of each; `None` when SJSON's edits
    /// of this text are not followed (a key with an escape, or twice), so that a change
    /// drops the text.
    pub(super) members: Option<Vec<Member>>,
    /// Whether anything changed since it was parsed.
    pub(super) changed: bool,
}

/// One key and value of a [`Map`] (opaque), with the key's tag for fast comparison.
#[derive(Clone)]
pub struct Slot {
    pub(super) tag: u64,
    pub(super) key: CompactString,
    pub(super) value: Value,
}

/// Appends the entry `tag`, `key`, `value` to `entries`, each field written straight into
/// its place. Pushed as a `Slot` built first, the entry was put together on the stack (the
/// key's last word and the tag stored one word each) and copied into the `Vec` in 16-byte
/// pieces, and a piece read back from two smaller stores just made waits for them to
/// land: that wait was half the time of adding a key, when a document is read and when a
/// path adds one.
#[inline(always)]
fn push_slot(entries: &mut Vec<Slot>, tag: u64, key: CompactString, value: Value) {
    entries.reserve(1);
    let len = entries.len();
    // SAFETY: `reserve` made room for one more entry past `len`; each field of that entry
    // is written exactly once (moved in, nothing dropped) before `set_len` makes it part
    // of the `Vec`, and nothing between can panic.
    unsafe {
        let slot = entries.as_mut_ptr().add(len);
        std::ptr::addr_of_mut!((*slot).tag).write(tag);
        std::ptr::addr_of_mut!((*slot).key).write(key);
        std::ptr::addr_of_mut!((*slot).value).write(value);
        entries.set_len(len + 1);
    }
}

/// A key's length and first seven bytes in one word: keys with different tags differ, and
/// keys of up to seven bytes with equal tags are equal.
#[inline]
pub(super) fn tag(key: &[u8]) -> u64 {
    let n = key.len();
    let head = if let Some(head) = key.first_chunk::<8>() {
        u64::from_le_bytes(*head) & 0x00ff_ffff_ffff_ffff
    } else {
        // Byte by byte: a variable-length copy would be a library call.
        key.iter()
            .enumerate()
            .fold(0u64, |v, (i, &b)| v | (b as u64) << (8 * i))
    };
    head | (n.min(255) as u64) << 56
}

/// Whether two keys with equal [`tag`]s are equal: the tags hold the length and the first
/// seven bytes, so a key of up to fifteen bytes is settled by comparing its last eight as
/// one word each (overlapping what the tag covers) instead of calling `memcmp`.
#[inline]
pub(super) fn same_tagged_key(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n <= 7 {
        return true;
    }
    if n <= 15
        && let (Some(ta), Some(tb)) = (a.last_chunk::<8>(), b.last_chunk::<8>())
    {
        return u64::from_le_bytes(*ta) == u64::from_le_bytes(*tb);
    }
    a[7..] == b[7..]
}

/// A key compiled once (by a path) for the `*_hinted` lookups of [`Map`]: its tag, and the
/// place it was last found at. Objects of one shape keep a key at one place, so a path read
/// or written on message after message usually checks one entry instead of scanning them.
/// The place is shared by the threads that run the path (relaxed: a stale one only costs
/// the scan).
#[derive(Default)]
pub struct KeyHint {
    tag: u64,
    at: std::sync::atomic::AtomicU32,
}

impl KeyHint {
    /// The hint for `key`, with no place yet.
    pub fn new(key: &str) -> KeyHint {
        KeyHint {
            tag: tag(key.as_bytes()),
            at: std::sync::atomic::AtomicU32::new(0),
        }
    }

    #[inline]
    fn at(&self) -> usize {
        self.at.load(std::sync::atomic::Ordering::Relaxed) as usize
    }

    #[inline]
    fn found_at(&self, i: usize) {
        if self.at() != i {
            self.at
                .store(i as u32, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Clone for KeyHint {
    fn clone(&self) -> KeyHint {
        KeyHint {
            tag: self.tag,
            at: std::sync::atomic::AtomicU32::new(self.at() as u32),
        }
    }
}

impl fmt::Debug for KeyHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyHint({:#x})", self.tag)
    }
}

/// How many keys an object created to be written into has room for: a mapping usually
/// writes several keys into each object it creates (ECS's `event`, `client` and `server`
/// get five to eight), so filling one does not move it again.
pub const CREATED_OBJECT_ROOM: usize = 8;

/// From this many keys on, an object keeps a hash index of its keys.
pub const INDEX_FROM: usize = 32;

impl Map {
    /// An empty object.
    pub fn new() -> Map {
        Map::default()
    }

    /// An empty object with room for `n` keys.
    pub fn with_capacity(n: usize) -> Map {
        Map {
            entries: Vec::with_capacity(n),
            extra: None,
        }
    }

    /// The object the reader left `unread`, whose text is `bytes`.
    pub(super) fn unread(bytes: Bytes, unread: Unread<Map>) -> Map {
        Map {
            entries: Vec::new(),
            extra: Some(Box::new(Extra {
                index: None,
                text: Some(Text {
                    bytes,
                    members: None,
                    changed: false,
                }),
                unread: Some(unread),
            })),
        }
    }

    /// The object with its members read: itself, or for an object the reader left unread,
    /// the reading of its text (made now, the first time).
    #[inline]
    pub(super) fn read(&self) -> &Map {
        if !self.entries.is_empty() || self.extra.is_none() {
            return self;
        }
        self.reading()
    }

    #[inline(never)]
    fn reading(&self) -> &Map {
        match self.extra.as_deref() {
            Some(Extra {
                unread: Some(unread),
                text: Some(text),
                ..
            }) => unread.get(&text.bytes, Value::into_object),
            _ => self,
        }
    }

    /// Makes an object the reader left unread its reading, before a change.
    #[inline]
    fn read_mut(&mut self) {
        if self.entries.is_empty() && self.extra.is_some() {
            self.take_reading();
        }
    }

    #[inline(never)]
    fn take_reading(&mut self) {
        let Some(extra) = self.extra.as_deref_mut() else {
            return;
        };
        let (Some(unread), Some(text)) = (extra.unread.take(), extra.text.as_ref()) else {
            return;
        };
        *self = unread.take(&text.bytes, Value::into_object);
    }

    /// Whether the reader left it unread and nothing has read it since (tests).
    #[cfg(test)]
    pub(super) fn is_unread(&self) -> bool {
        self.extra
            .as_deref()
            .and_then(|e| e.unread.as_ref())
            .is_some_and(|u| !u.is_read())
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.read().entries.len()
    }

    /// Whether it has no keys.
    pub fn is_empty(&self) -> bool {
        self.read().entries.is_empty()
    }

    /// The position of `key`.
    pub fn get_index_of(&self, key: &str) -> Option<usize> {
        self.get_index_of_tagged(key, tag(key.as_bytes()))
    }

    /// The position of `key`, whose [`tag`] is `t`.
    fn get_index_of_tagged(&self, key: &str, t: u64) -> Option<usize> {
        self.read().position_tagged(key, t)
    }

    /// [`Map::get_index_of`] in an object already read (see [`Map::position_tagged`]).
    fn position(&self, key: &str) -> Option<usize> {
        self.position_tagged(key, tag(key.as_bytes()))
    }

    /// [`Map::get_index_of_tagged`] in an object already read (its own entries, or the
    /// reading [`Map::read`] gave): every lookup reads the object once, not once per step.
    fn position_tagged(&self, key: &str, t: u64) -> Option<usize> {
        match self.index() {
            Some(ix) => ix.get(key).copied(),
            None => {
                let key = key.as_bytes();
                if key.len() <= 7 {
                    self.entries.iter().position(|e| e.tag == t)
                } else {
                    self.entries
                        .iter()
                        .position(|e| e.tag == t && same_tagged_key(e.key.as_bytes(), key))
                }
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.get_index_of(key)
            .map(|i| &self.read().entries[i].value)
    }

    /// The position of `key`, compiled as `hint`: the entry at the hint's place when it holds
    /// the key, else the result of the usual lookup, whose place the hint then keeps. Keys
    /// are unique in an object, so both find the same entry.
    #[inline]
    pub fn get_index_hinted(&self, key: &str, hint: &KeyHint) -> Option<usize> {
        self.read().position_hinted(key, hint)
    }

    /// [`Map::get_index_hinted`] in an object already read (see [`Map::position_tagged`]).
    #[inline]
    fn position_hinted(&self, key: &str, hint: &KeyHint) -> Option<usize> {
        let at = hint.at();
        if let Some(e) = self.entries.get(at)
            && e.tag == hint.tag
            && same_tagged_key(e.key.as_bytes(), key.as_bytes())
        {
            return Some(at);
        }
        let i = self.position_tagged(key, hint.tag)?;
        hint.found_at(i);
        Some(i)
    }

    /// The value of `key`, compiled as `hint` (see [`Map::get_index_hinted`]).
    #[inline]
    pub fn get_hinted(&self, key: &str, hint: &KeyHint) -> Option<&Value> {
        let m = self.read();
        m.position_hinted(key, hint).map(|i| &m.entries[i].value)
    }

    /// The value of `key`, for changing.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.read_mut();
        let i = self.position(key)?;
        self.will_change(Change::Value(i));
        Some(&mut self.entries[i].value)
    }

    /// The hash index, on a large object.
    #[inline]
    fn index(&self) -> Option<&HashMap<CompactString, usize, Hasher>> {
        self.extra.as_deref().and_then(|e| e.index.as_ref())
    }

    /// The JSON text the object was parsed from, when it has not changed since: written
    /// out as it is, it keeps the input's spacing and number forms, as SJSON does.
    pub fn text(&self) -> Option<&Bytes> {
        self.source().filter(|t| !t.changed).map(|t| &t.bytes)
    }

    /// The text it was parsed from and what changed since.
    pub(super) fn source(&self) -> Option<&Text> {
        self.extra.as_deref().and_then(|e| e.text.as_ref())
    }

    /// Records the text the object was parsed from and where its members are (the
    /// parser's, see `parse.rs`).
    pub(super) fn set_text(&mut self, bytes: Bytes, members: Option<Vec<Member>>) {
        self.extra.get_or_insert_with(Box::default).text = Some(Text {
            bytes,
            members,
            changed: false,
        });
    }

    /// Drops the original text: the object is written compact from now on.
    #[inline]
    pub fn forget_text(&mut self) {
        self.read_mut();
        if let Some(e) = &mut self.extra {
            if e.index.is_none() {
                self.extra = None;
            } else {
                e.text = None;
            }
        }
    }

    /// Records, before it happens, a change that SJSON could have made to the text.
    #[inline]
    fn will_change(&mut self, change: Change) {
        if self.extra.as_ref().is_some_and(|e| e.text.is_some()) {
            self.record(change);
        }
    }

    fn record(&mut self, change: Change) {
        if let Change::Removal(0) = change
            && self.removal_of_the_first_depends_on_order()
        {
            self.rebase();
        }
        let Some(text) = self.extra.as_deref_mut().and_then(|e| e.text.as_mut()) else {
            return;
        };
        let Some(members) = text.members.as_mut() else {
            // Not followed: compact from now on.
            return self.forget_text();
        };
        text.changed = true;
        let (i, state) = match change {
            Change::Keys => return,
            Change::Values => {
                members
                    .iter_mut()
                    .filter(|m| m.state == State::Unchanged)
                    .for_each(|m| m.state = State::Changed);
                return;
            }
            Change::Value(i) => (i, State::Changed),
            Change::Removal(i) => (i, State::Deleted),
        };
        // Entries keep the members' order (every change that reorders drops the text), a
        // removed key is a deleted member, and added keys come last: entry `i` is the
        // `i`-th member not deleted, or an added key.
        let at = members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.state.is_entry())
            .nth(i)
            .map(|(at, _)| at);
        let Some(at) = at else { return };
        let key = &self.entries[i].key;
        debug_assert!(members[at].is(&text.bytes, key));
        members[at].state = state;
        // A removed key goes whole: its later duplicates too, which SJSON would uncover.
        if state == State::Deleted {
            for m in members.iter_mut().filter(|m| m.state == State::Shadowed) {
                if m.is(&text.bytes, key) {
                    m.state = State::Deleted;
                }
            }
        }
    }

    /// Whether removing the first entry now leaves text that depends on the order of the
    /// edits so far, which the record does not keep: when it is the last original member
    /// (or an added key with none left). SJSON takes the first member out with the white
    /// space before it and the comma after it, and any later one from the comma before it,
    /// so what is left inside the braces of an emptied object (or before the keys added
    /// to it) differs with the order the members went in.
    fn removal_of_the_first_depends_on_order(&self) -> bool {
        let Some(members) = self.source().and_then(|t| t.members.as_deref()) else {
            return false;
        };
        let originals = members.iter().filter(|m| m.state != State::Deleted).count();
        let entries = members.iter().filter(|m| m.state.is_entry()).count();
        originals == 0 || originals == 1 && entries == 1
    }

    /// Takes the text as it stands (the changes so far spliced in, in order) as the text
    /// parsed: what SJSON holds at this point, whatever order got it there.
    fn rebase(&mut self) {
        let mut text = Vec::new();
        super::write::write_map(&mut text, self);
        match super::parse::from_bytes(&Bytes::from(text)) {
            Some(Value::Object(m)) => *self = m,
            _ => self.forget_text(),
        }
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get_index_of(key).is_some()
    }

    fn push(&mut self, key: CompactString, v: Value) -> usize {
        let t = tag(key.as_bytes());
        self.push_tagged(key, t, v)
    }

    /// [`Map::push`] of a key whose [`tag`] is `t` (a path computed it when compiled).
    ///
    /// Inlined for the common case, a small object with no text or index to keep up: the
    /// entry is then built where it goes (a value passed through a call is read back in
    /// wider pieces than it was written in, and the read waits for the write to land).
    #[inline]
    fn push_tagged(&mut self, key: CompactString, t: u64, v: Value) -> usize {
        debug_assert_eq!(t, tag(key.as_bytes()), "the tag of {key:?}");
        if self.extra.is_some() || self.entries.len() >= INDEX_FROM {
            return self.push_tagged_keeping_up(key, t, v);
        }
        let i = self.entries.len();
        push_slot(&mut self.entries, t, key, v);
        i
    }

    /// [`Map::push_tagged`] on an object with text or a hash index to keep up, or about to
    /// need an index.
    #[inline(never)]
    fn push_tagged_keeping_up(&mut self, key: CompactString, t: u64, v: Value) -> usize {
        self.read_mut();
        self.will_change(Change::Keys);
        let i = self.entries.len();
        let indexed = match self.extra.as_deref_mut().and_then(|e| e.index.as_mut()) {
            Some(ix) => {
                ix.insert(key.clone(), i);
                true
            }
            None => false,
        };
        push_slot(&mut self.entries, t, key, v);
        if !indexed && self.entries.len() > INDEX_FROM {
            self.reindex();
        }
        i
    }

    /// Rebuilds the hash index after the keys changed (dropping it from a small object).
    pub(super) fn reindex(&mut self) {
        self.read_mut();
        if self.entries.len() > INDEX_FROM {
            let mut ix =
                HashMap::with_capacity_and_hasher(self.entries.len() * 2, Hasher::default());
            for (i, e) in self.entries.iter().enumerate() {
                ix.insert(e.key.clone(), i);
            }
            self.extra.get_or_insert_with(Box::default).index = Some(ix);
        } else if let Some(e) = &mut self.extra {
            if e.text.is_none() {
                self.extra = None;
            } else {
                e.index = None;
            }
        }
    }

    /// Whether it keeps a hash index (tests).
    #[cfg(test)]
    pub(super) fn has_index(&self) -> bool {
        self.read().index().is_some()
    }

    /// Sets `key`; a new key goes last, an existing one keeps its place. Returns the old value.
    pub fn insert(&mut self, key: impl Into<CompactString>, v: Value) -> Option<Value> {
        self.read_mut();
        let key = key.into();
        match self.position(&key) {
            Some(i) => {
                self.will_change(Change::Value(i));
                Some(std::mem::replace(&mut self.entries[i].value, v))
            }
            None => {
                self.push(key, v);
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others.
    pub fn shift_remove(&mut self, key: &str) -> Option<Value> {
        self.read_mut();
        let i = self.position(key)?;
        self.will_change(Change::Removal(i));
        let e = self.entries.remove(i);
        if self.index().is_some() {
            self.reindex();
        }
        Some(e.value)
    }

    /// Removes `key`, keeping the order of the others (as serde_json's `remove` with
    /// `preserve_order`).
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.shift_remove(key)
    }

    /// The entry of `key`.
    pub fn entry(&mut self, key: impl Into<CompactString>) -> Entry<'_> {
        self.read_mut();
        let key = key.into();
        match self.position(&key) {
            Some(i) => {
                self.will_change(Change::Value(i));
                Entry::Occupied(&mut self.entries[i].value)
            }
            None => Entry::Vacant(self, key),
        }
    }

    /// The value of `key`, inserted as `null` first when missing; one lookup, and the key is
    /// only copied when it is inserted.
    pub fn get_or_insert_null(&mut self, key: &CompactString) -> &mut Value {
        self.get_or_insert_null_tagged(key, tag(key.as_bytes()))
    }

    /// [`Map::get_or_insert_null`] for a key compiled as `hint` (see
    /// [`Map::get_index_hinted`]).
    #[inline]
    pub fn get_or_insert_null_hinted(&mut self, key: &CompactString, hint: &KeyHint) -> &mut Value {
        self.read_mut();
        let found = self.position_hinted(key, hint);
        let i = self.found_or_pushed(found, key, hint.tag);
        hint.found_at(i);
        &mut self.entries[i].value
    }

    /// Sets `key`, compiled as `hint`, to `v`: in its place when present, else added at the
    /// end. What a path's last step does: the value goes straight into its entry, with no
    /// null put there first to be overwritten.
    #[inline]
    pub fn insert_hinted(&mut self, key: &CompactString, hint: &KeyHint, v: Value) {
        self.read_mut();
        match self.position_hinted(key, hint) {
            Some(i) => {
                self.will_change(Change::Value(i));
                self.entries[i].value = v;
            }
            None => {
                let i = self.push_tagged(key.clone(), hint.tag, v);
                hint.found_at(i);
            }
        }
    }

    /// Whether it has no keys and nothing to keep up (no text, no index): an object a
    /// write has just created. Keys known to differ from each other can be added to it
    /// with [`Map::push_absent_hinted`], no lookup each.
    #[inline]
    pub(crate) fn is_blank(&self) -> bool {
        self.entries.is_empty() && self.extra.is_none()
    }

    /// Adds `key`, compiled as `hint`, at the end, the caller knowing it is not there (it
    /// was added to a [`Map::is_blank`] object along with keys that differ from it): what
    /// [`Map::insert_hinted`] does then, without looking for the key first.
    #[inline]
    pub(crate) fn push_absent_hinted(&mut self, key: &CompactString, hint: &KeyHint, v: Value) {
        debug_assert!(self.get_index_of(key).is_none(), "{key:?} is there already");
        let i = self.push_tagged(key.clone(), hint.tag, v);
        hint.found_at(i);
    }

    /// [`Map::get_or_insert_null`] for a key whose [`tag`] is `t`.
    fn get_or_insert_null_tagged(&mut self, key: &CompactString, t: u64) -> &mut Value {
        self.read_mut();
        let found = self.position_tagged(key, t);
        let i = self.found_or_pushed(found, key, t);
        &mut self.entries[i].value
    }

    /// The place of `key` (tag `t`), `found` there or else pushed as null; either way about
    /// to change.
    #[inline(always)]
    fn found_or_pushed(&mut self, found: Option<usize>, key: &CompactString, t: u64) -> usize {
        match found {
            Some(i) => {
                self.will_change(Change::Value(i));
                i
            }
            None => self.push_tagged(key.clone(), t, Value::Null),
        }
    }

    /// Keys and values in order.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = (&CompactString, &Value)> + ExactSizeIterator {
        self.read().entries.iter().map(|e| (&e.key, &e.value))
    }

    /// Keys and values in order, values changeable.
    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&CompactString, &mut Value)> + ExactSizeIterator {
        self.read_mut();
        self.will_change(Change::Values);
        self.entries.iter_mut().map(|e| (&e.key, &mut e.value))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &CompactString> + ExactSizeIterator {
        self.read().entries.iter().map(|e| &e.key)
    }

    /// Values in order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.read().entries.iter().map(|e| &e.value)
    }

    /// Values in order, changeable.
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.read_mut();
        self.will_change(Change::Values);
        self.entries.iter_mut().map(|e| &mut e.value)
    }

    /// Sorts the keys.
    pub fn sort_keys(&mut self) {
        self.forget_text();
        self.entries.sort_by(|a, b| a.key.cmp(&b.key));
        if self.index().is_some() {
            self.reindex();
        }
    }

    /// Keeps the entries for which `f` holds.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &mut Value) -> bool) {
        self.forget_text();
        self.entries.retain_mut(|e| f(e.key.as_str(), &mut e.value));
        if self.index().is_some() {
            self.reindex();
        }
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.extra = None;
    }
}

/// An object's entries as they are read, in the `Vec` that becomes the object's (the reader
/// sizes it from the last object of its depth, so it is allocated once and never copied);
/// an index is added once the object is large. A later duplicate key is dropped
/// (`keep_first`, GJSON's reading) or replaces the earlier value in its place (as
/// serde_json's map does). serde's reader (`serde_impls.rs`) builds objects through it too,
/// as serde_json would.
#[derive(Default)]
pub(super) struct ObjectBuilder {
    keep_first: bool,
    buf: Vec<Slot>,
    /// One bit per key seen, chosen by its tag: a key whose bit is clear cannot be a
    /// duplicate, so the comparison with every earlier key is skipped.
    seen: u64,
    large: Option<Map>,
}

impl ObjectBuilder {
    /// A builder with room for `room` keys; a later duplicate key is dropped when
    /// `keep_first`, else it replaces.
    pub(super) fn new(keep_first: bool, room: usize) -> ObjectBuilder {
        ObjectBuilder {
            keep_first,
            buf: Vec::with_capacity(room),
            ..ObjectBuilder::default()
        }
    }

    /// Adds `key`; `false` when it was there already (a duplicate).
    pub(super) fn push(&mut self, key: CompactString, value: Value) -> bool {
        if let Some(m) = &mut self.large {
            if let Some(i) = m.get_index_of(&key) {
                if !self.keep_first {
                    m.entries[i].value = value;
                }
                return false;
            }
            m.push(key, value);
            return true;
        }
        let tag = tag(key.as_bytes());
        let bit = seen_bit(tag);
        if self.seen & bit != 0
            && let Some(e) = self
                .buf
                .iter_mut()
                .find(|e| e.tag == tag && same_tagged_key(e.key.as_bytes(), key.as_bytes()))
        {
            if !self.keep_first {
                e.value = value;
            }
            return false;
        }
        self.push_new(tag, key, value);
        true
    }

    /// Adds `key`, whose tag is `tag`, known not to be there: the reader found this object's
    /// keys so far to be, one for one, the distinct keys of the last object it read.
    #[inline]
    pub(super) fn push_distinct(&mut self, tag: u64, key: CompactString, value: Value) {
        if self.large.is_some() {
            self.push(key, value);
            return;
        }
        self.push_new(tag, key, value);
    }

    /// Adds an entry not there yet to the small object being built.
    #[inline(always)]
    fn push_new(&mut self, tag: u64, key: CompactString, value: Value) {
        self.seen |= seen_bit(tag);
        push_slot(&mut self.buf, tag, key, value);
        if self.buf.len() > INDEX_FROM {
            // A large object: go on through the indexed map.
            let mut m = Map {
                entries: std::mem::take(&mut self.buf),
                extra: None,
            };
            m.reindex();
            self.large = Some(m);
        }
    }

    pub(super) fn finish(self) -> Map {
        match self.large {
            Some(m) => m,
            None => Map {
                entries: self.buf,
                extra: None,
            },
        }
    }
}

/// The bit of [`ObjectBuilder::seen`] that a key with tag `tag` sets.
#[inline(always)]
fn seen_bit(tag: u64) -> u64 {
    1u64 << (tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

/// A change to a map, recorded before it is made.
#[derive(Clone, Copy)]
enum Change {
    /// The value of entry `i` (replaced, or changed in place).
    Value(usize),
    /// Every value.
    Values,
    /// Entry `i` removed.
    Removal(usize),
    /// A key added (added keys are the entries without a member: nothing to note).
    Keys,
}

/// A key's place in a [`Map`], for inserting only when missing.
pub enum Entry<'m> {
    /// The key is there.
    Occupied(&'m mut Value),
    /// The key is missing.
    Vacant(&'m mut Map, CompactString),
}

impl<'m> Entry<'m> {
    /// The value, inserting `v` when missing.
    pub fn or_insert(self, v: Value) -> &'m mut Value {
        self.or_insert_with(|| v)
    }

    /// The value, inserting `f()` when missing.
    pub fn or_insert_with(self, f: impl FnOnce() -> Value) -> &'m mut Value {
        match self {
            Entry::Occupied(v) => v,
            Entry::Vacant(m, k) => {
                let i = m.push(k, f());
                &mut m.entries[i].value
            }
        }
    }

    /// The value, inserting `null` when missing.
    pub fn or_default(self) -> &'m mut Value {
        self.or_insert_with(Value::default)
    }
}

impl PartialEq for Map {
    /// Objects are equal when they have the same keys and values, in any order (as JSON).
    fn eq(&self, other: &Map) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k.as_str()) == Some(v))
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Into<CompactString>> FromIterator<(K, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut m = Map::with_capacity(iter.size_hint().0);
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<K: Into<CompactString>> Extend<(K, Value)> for Map {
    fn extend<I: IntoIterator<Item = (K, Value)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl IntoIterator for Map {
    type Item = (CompactString, Value);
    type IntoIter = std::iter::Map<std::vec::IntoIter<Slot>, fn(Slot) -> (CompactString, Value)>;
    fn into_iter(mut self) -> Self::IntoIter {
        self.read_mut();
        std::mem::take(&mut self.entries)
            .into_iter()
            .map(|e| (e.key, e.value))
    }
}

type Pairs<'a> =
    std::iter::Map<std::slice::Iter<'a, Slot>, fn(&'a Slot) -> (&'a CompactString, &'a Value)>;

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a CompactString, &'a Value);
    type IntoIter = Pairs<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.read().entries.iter().map(|e| (&e.key, &e.value))
    }
}
