//! [`Array`], the JSON array: its values in order, and, for an array parsed from text, that
//! text and what changed since, so that it is written back as Substation's SJSON, which
//! edits the text in place, would leave it (`parse.rs`, `splice.rs`), as [`super::Map`]
//! does for objects.
//!
//! An array inside a document is left unread by the reader until it is used, as an object
//! is (see [`super::Map`]): reading it reads its text into a reading kept beside it, a
//! change makes that reading its own.
//!
//! Reading goes through the slice it derefs to. Every change goes through a method that
//! records it first; there is no `DerefMut`, so a change cannot bypass the record.
//!
//! The values are a [`ThinVec`] (one pointer; its length and capacity live in its
//! allocation), so that an array with its text pointer is two words and a [`Value`] stays
//! four: every object entry and array element is a `Value`. With a `Vec` here (a fifth
//! word) the Zeek benchmark took 3% longer; with this, 1% (within its noise).

use std::fmt;
use std::ops::{Deref, Index, IndexMut};
use std::slice::SliceIndex;

use bytes::Bytes;
use thin_vec::ThinVec;

use super::Value;
use super::parse::Unread;
use super::splice::{Element, State};

/// A JSON array.
#[derive(Clone, Default)]
pub struct Array {
    items: ThinVec<Value>,
    text: Option<Box<Text>>,
}

/// The text an array was parsed from and what changed since.
#[derive(Clone)]
pub(super) struct Text {
    pub(super) bytes: Bytes,
    /// Where its original elements are in `bytes`, and what became of each.
    pub(super) elements: Vec<Element>,
    /// Whether anything changed since it was parsed.
    pub(super) changed: bool,
    /// An index at or past the end was set: SJSON then writes the array anew, each
    /// element's own text joined by bare commas, and pads it with nulls.
    pub(super) rejoined: bool,
    /// For an array not read yet (its items empty), its reading.
    unread: Option<Unread<Array>>,
}

/// A change to an array, recorded before it is made.
#[derive(Clone, Copy)]
enum Change {
    /// Item `i` (replaced, or changed in place).
    Item(usize),
    /// Every item.
    Items,
    /// Item `i` removed.
    Removal(usize),
    /// Items added at the end, as SJSON's `-1` appends them.
    Appended,
    /// Items added at the end by setting an index past it (SJSON rewrites the separators).
    Padded,
}

impl Array {
    /// An empty array.
    pub fn new() -> Array {
        Array::default()
    }

    /// An empty array with room for `n` values.
    pub fn with_capacity(n: usize) -> Array {
        Array {
            items: ThinVec::with_capacity(n),
            text: None,
        }
    }

    /// The values parsed from `bytes`, whose elements are at `elements` (the parser's).
    pub(super) fn with_text(items: ThinVec<Value>, bytes: Bytes, elements: Vec<Element>) -> Array {
        Array {
            items,
            text: Some(Box::new(Text {
                bytes,
                elements,
                changed: false,
                rejoined: false,
                unread: None,
            })),
        }
    }

    /// The array the reader left `unread`, whose text is `bytes`.
    pub(super) fn unread(bytes: Bytes, unread: Unread<Array>) -> Array {
        Array {
            items: ThinVec::new(),
            text: Some(Box::new(Text {
                bytes,
                elements: Vec::new(),
                changed: false,
                rejoined: false,
                unread: Some(unread),
            })),
        }
    }

    /// The array with its values read: itself, or for an array the reader left unread, the
    /// reading of its text (made now, the first time).
    #[inline]
    fn read(&self) -> &Array {
        if !self.items.is_empty() || self.text.is_none() {
            return self;
        }
        self.reading()
    }

    #[inline(never)]
    fn reading(&self) -> &Array {
        match self.text.as_deref() {
            Some(Text {
                unread: Some(unread),
                bytes,
                ..
            }) => unread.get(bytes, Value::into_array),
            _ => self,
        }
    }

    /// Makes an array the reader left unread its reading, before a change.
    #[inline]
    fn read_mut(&mut self) {
        if self.items.is_empty() && self.text.is_some() {
            self.take_reading();
        }
    }

    #[inline(never)]
    fn take_reading(&mut self) {
        let Some(text) = self.text.as_deref_mut() else {
            return;
        };
        if let Some(unread) = text.unread.take() {
            *self = unread.take(&text.bytes, Value::into_array);
        }
    }

    /// Whether the reader left it unread and nothing has read it since (tests).
    #[cfg(test)]
    pub(super) fn is_unread(&self) -> bool {
        self.text
            .as_deref()
            .and_then(|t| t.unread.as_ref())
            .is_some_and(|u| !u.is_read())
    }

    /// The values, as a slice.
    pub fn as_slice(&self) -> &[Value] {
        &self.read().items
    }

    /// The JSON text the array was parsed from, when it has not changed since.
    pub fn text(&self) -> Option<&Bytes> {
        self.source().filter(|t| !t.changed).map(|t| &t.bytes)
    }

    /// The text it was parsed from and what changed since.
    pub(super) fn source(&self) -> Option<&Text> {
        self.text.as_deref()
    }

    /// Drops the original text: the array is written compact from now on.
    #[inline]
    pub fn forget_text(&mut self) {
        self.read_mut();
        self.text = None;
    }

    /// Records, before it happens, a change that SJSON could have made to the text.
    #[inline]
    fn will_change(&mut self, change: Change) {
        if self.text.is_some() {
            self.record(change);
        }
    }

    fn record(&mut self, change: Change) {
        self.read_mut();
        if let Change::Removal(0) = change
            && self.removal_of_the_first_depends_on_order()
        {
            self.rebase();
        }
        let Some(text) = self.text.as_deref_mut() else {
            return;
        };
        text.changed = true;
        let (i, state) = match change {
            Change::Appended => return,
            Change::Padded => {
                text.rejoined = true;
                return;
            }
            Change::Items => {
                text.elements
                    .iter_mut()
                    .filter(|e| e.state == State::Unchanged)
                    .for_each(|e| e.state = State::Changed);
                return;
            }
            Change::Item(i) => (i, State::Changed),
            Change::Removal(i) => (i, State::Deleted),
        };
        // Items keep the elements' order (every change that reorders drops the text), a
        // removed item is a deleted element, and added items come last: item `i` is the
        // `i`-th element not deleted, or an added one.
        if let Some(e) = text
            .elements
            .iter_mut()
            .filter(|e| e.state != State::Deleted)
            .nth(i)
        {
            e.state = state;
        }
    }

    /// Whether removing the first value now leaves text that depends on the order of the
    /// edits so far (as for an object, see `Map`): it is the last original element, or an
    /// added value with none left.
    fn removal_of_the_first_depends_on_order(&self) -> bool {
        let Some(text) = self.source() else {
            return false;
        };
        let originals = text
            .elements
            .iter()
            .filter(|e| e.state != State::Deleted)
            .count();
        originals <= 1
    }

    /// Takes the text as it stands as the text parsed (see `Map`).
    fn rebase(&mut self) {
        let mut text = Vec::new();
        super::write::write_array(&mut text, self);
        match super::parse::from_bytes(&Bytes::from(text)) {
            Some(Value::Array(a)) => *self = a,
            _ => self.forget_text(),
        }
    }

    /// The value at `i`, for changing.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Value> {
        self.read_mut();
        if i >= self.items.len() {
            return None;
        }
        self.will_change(Change::Item(i));
        self.items.get_mut(i)
    }

    /// The last value, for changing.
    pub fn last_mut(&mut self) -> Option<&mut Value> {
        self.read_mut();
        let i = self.items.len().checked_sub(1)?;
        self.get_mut(i)
    }

    /// The values in order, changeable.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Value> {
        self.read_mut();
        self.will_change(Change::Items);
        self.items.iter_mut()
    }

    /// Adds `v` at the end (as SJSON's `-1` appends).
    pub fn push(&mut self, v: Value) {
        self.read_mut();
        self.will_change(Change::Appended);
        self.items.push(v);
    }

    /// Removes the last value.
    pub fn pop(&mut self) -> Option<Value> {
        self.read_mut();
        let i = self.items.len().checked_sub(1)?;
        self.will_change(Change::Removal(i));
        self.items.pop()
    }

    /// Removes the value at `i` (which must be there), keeping the order of the others.
    pub fn remove(&mut self, i: usize) -> Value {
        self.read_mut();
        assert!(i < self.items.len(), "index {i} past the end of the array");
        self.will_change(Change::Removal(i));
        self.items.remove(i)
    }

    /// Grows the array to `len` values with nulls, as SJSON's set of an index past the end
    /// does (which writes the array anew: its separators become bare commas). Does nothing
    /// when it is that long already.
    pub fn pad_to(&mut self, len: usize) {
        self.read_mut();
        if len > self.items.len() {
            self.will_change(Change::Padded);
            self.items.resize(len, Value::Null);
        }
    }

    /// The values, for any change that keeps their number (sorting, reversing): the text is
    /// dropped, and the array is written compact from now on (SJSON cannot reorder).
    pub fn as_mut_slice(&mut self) -> &mut [Value] {
        self.forget_text();
        &mut self.items
    }

    /// The values.
    pub fn into_vec(mut self) -> Vec<Value> {
        self.read_mut();
        self.items.into()
    }
}

impl Deref for Array {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.read().items
    }
}

impl<I: SliceIndex<[Value]>> Index<I> for Array {
    type Output = I::Output;
    fn index(&self, i: I) -> &I::Output {
        &self.read().items[i]
    }
}

impl IndexMut<usize> for Array {
    /// The value at `i` (which must be there), for changing.
    fn index_mut(&mut self, i: usize) -> &mut Value {
        self.read_mut();
        assert!(i < self.items.len(), "index {i} past the end of the array");
        self.will_change(Change::Item(i));
        &mut self.items[i]
    }
}

impl PartialEq for Array {
    /// Arrays are equal when their values are (whatever text they came from).
    fn eq(&self, other: &Array) -> bool {
        self.read().items == other.read().items
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.read().items.iter()).finish()
    }
}

impl From<Vec<Value>> for Array {
    fn from(items: Vec<Value>) -> Array {
        items.into_iter().collect()
    }
}

impl From<Array> for Vec<Value> {
    fn from(a: Array) -> Vec<Value> {
        a.into_vec()
    }
}

impl FromIterator<Value> for Array {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Array {
        Array {
            items: iter.into_iter().collect(),
            text: None,
        }
    }
}

impl Extend<Value> for Array {
    /// Appends each value, as [`Array::push`].
    fn extend<I: IntoIterator<Item = Value>>(&mut self, iter: I) {
        self.read_mut();
        self.will_change(Change::Appended);
        self.items.extend(iter);
    }
}

impl IntoIterator for Array {
    type Item = Value;
    type IntoIter = thin_vec::IntoIter<Value>;
    fn into_iter(mut self) -> Self::IntoIter {
        self.read_mut();
        self.items.into_iter()
    }
}

impl<'a> IntoIterator for &'a Array {
    type Item = &'a Value;
    type IntoIter = std::slice::Iter<'a, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.read().items.iter()
    }
}

impl<'a> IntoIterator for &'a mut Array {
    type Item = &'a mut Value;
    type IntoIter = std::slice::IterMut<'a, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}
