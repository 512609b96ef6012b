//! The two ways of writing a PartiQL `UPDATE` with several paths, and which one a store's
//! service reads. AWS documents repeated clauses, one path each (`SET "a" = ? SET "b" = ?
//! REMOVE "c" REMOVE "d"`); the emulator (dynoxide) reads only comma lists (`SET "a" = ?,
//! "b" = ? REMOVE "c", "d"`) and refuses the documented form as a statement error
//! (`ValidationError`, "UPDATE requires a WHERE clause"). A store writes the documented
//! form until a statement in it is refused, then the comma form for the rest of its life;
//! when both are refused, its keys go the way of any refused statement (taken alone,
//! committed in a transaction) and no `UPDATE` statement is sent any more.

use std::sync::atomic::{AtomicU8, Ordering};

/// A way of writing an `UPDATE`'s clauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// AWS's documented form: `SET "a" = ? SET "b" = ? REMOVE "c" REMOVE "d"`.
    Documented,
    /// Comma lists: `SET "a" = ?, "b" = ? REMOVE "c", "d"`.
    Comma,
}

impl Form {
    /// The `SET` and `REMOVE` clauses of an `UPDATE` (paths already quoted; `set` without
    /// the `= ?`), in this form.
    pub(super) fn clauses(self, set: &[String], remove: &[String]) -> String {
        let set = set.iter().map(|p| format!("{p} = ?"));
        let remove = remove.iter().map(String::as_str);
        match self {
            Form::Documented => set
                .map(|s| format!("SET {s}"))
                .chain(remove.map(|r| format!("REMOVE {r}")))
                .collect::<Vec<_>>()
                .join(" "),
            Form::Comma => {
                let set: Vec<String> = set.collect();
                let remove: Vec<&str> = remove.collect();
                let mut out = Vec::new();
                if !set.is_empty() {
                    out.push(format!("SET {}", set.join(", ")));
                }
                if !remove.is_empty() {
                    out.push(format!("REMOVE {}", remove.join(", ")));
                }
                out.join(" ")
            }
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Form::Documented => "repeated clauses, one path each (SET \"a\" = ? SET \"b\" = ?)",
            Form::Comma => "comma lists (SET \"a\" = ?, \"b\" = ?)",
        }
    }
}

/// What to do with a statement the service refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Send it again in [`Dialect::form`]: the refusal was of the form it was written in.
    Retry,
    /// Refused whatever the form: the key goes the way of a refused statement.
    Fallback,
}

/// The documented form, not yet seen read.
const DOCUMENTED_UNPROVEN: u8 = 0;
/// The documented form, seen read: a refusal is of the statement, not its form.
const DOCUMENTED: u8 = 1;
/// The comma form, after the documented one was refused; not yet seen read.
const COMMA_UNPROVEN: u8 = 2;
/// The comma form, seen read.
const COMMA: u8 = 3;
/// Both forms refused: no `UPDATE` statements.
const NEITHER: u8 = 4;

/// Which form a store's statements are written in (see the module documentation). Shared
/// by the calls in flight; it only moves forward (documented, comma, neither), except that
/// a form seen read is kept for good.
#[derive(Debug, Default)]
pub(super) struct Dialect(AtomicU8);

impl Dialect {
    /// The form to write `UPDATE`s in; `None`: both were refused, send none.
    pub(super) fn form(&self) -> Option<Form> {
        match self.0.load(Ordering::Acquire) {
            DOCUMENTED_UNPROVEN | DOCUMENTED => Some(Form::Documented),
            COMMA_UNPROVEN | COMMA => Some(Form::Comma),
            _ => None,
        }
    }

    /// An `UPDATE` written in `form` was read (applied, or its condition evaluated): the
    /// form is kept for good, unless another one was seen read first.
    pub(super) fn read(&self, form: Form) {
        let proven = match form {
            Form::Documented => DOCUMENTED,
            Form::Comma => COMMA,
        };
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s != DOCUMENTED && s != COMMA && s != proven).then_some(proven)
            });
    }

    /// An `UPDATE` written in `form` was refused (`ValidationError`) by the service of
    /// `table`: whether to send it again in the form now in use. The first refusal of the
    /// documented form (not seen read) switches to the comma form, logged at info level; a
    /// refusal of the comma form (not seen read) gives up on statements, logged as a
    /// warning.
    pub(super) fn refused(&self, form: Form, table: &str) -> Verdict {
        loop {
            let state = self.0.load(Ordering::Acquire);
            let next = match (state, form) {
                (DOCUMENTED_UNPROVEN, Form::Documented) => COMMA_UNPROVEN,
                (COMMA_UNPROVEN, Form::Comma) => NEITHER,
                // Written before another call switched forms: send it in the new one.
                (COMMA_UNPROVEN | COMMA, Form::Documented) => return Verdict::Retry,
                // The form is read: this statement is refused for itself.
                _ => return Verdict::Fallback,
            };
            if self
                .0
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            return match next {
                COMMA_UNPROVEN => {
                    tracing::info!(
                        table,
                        form = Form::Comma.describe(),
                        refused = Form::Documented.describe(),
                        "the lock table's PartiQL refused AWS's documented UPDATE form; lock statements are written in comma lists from now on"
                    );
                    Verdict::Retry
                }
                _ => {
                    tracing::warn!(
                        table,
                        "the lock table's PartiQL refused UPDATE statements in both forms ({} and {}): keys found committed are taken alone with UpdateItem and commits go in transactions from now on, at the other modes' cost",
                        Form::Documented.describe(),
                        Form::Comma.describe(),
                    );
                    Verdict::Fallback
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|p| format!("\"{p}\"")).collect()
    }

    #[test]
    fn both_forms_are_written() {
        let set = paths(&["a", "b"]);
        let remove = paths(&["c", "d"]);
        assert_eq!(
            Form::Documented.clauses(&set, &remove),
            "SET \"a\" = ? SET \"b\" = ? REMOVE \"c\" REMOVE \"d\""
        );
        assert_eq!(
            Form::Comma.clauses(&set, &remove),
            "SET \"a\" = ?, \"b\" = ? REMOVE \"c\", \"d\""
        );
        assert_eq!(Form::Comma.clauses(&set, &[]), "SET \"a\" = ?, \"b\" = ?");
    }

    #[test]
    fn the_documented_form_first_then_the_comma_form_then_neither() {
        let d = Dialect::default();
        assert_eq!(d.form(), Some(Form::Documented));
        assert_eq!(d.refused(Form::Documented, "t"), Verdict::Retry);
        assert_eq!(d.form(), Some(Form::Comma));
        // A statement written before the switch, refused after it: sent again.
        assert_eq!(d.refused(Form::Documented, "t"), Verdict::Retry);
        assert_eq!(d.refused(Form::Comma, "t"), Verdict::Fallback);
        assert_eq!(d.form(), None);
        assert_eq!(d.refused(Form::Comma, "t"), Verdict::Fallback);
        assert_eq!(d.refused(Form::Documented, "t"), Verdict::Fallback);
        // A comma statement in flight that was read after all: the comma form for good.
        d.read(Form::Comma);
        assert_eq!(d.form(), Some(Form::Comma));
        assert_eq!(d.refused(Form::Comma, "t"), Verdict::Fallback);
        assert_eq!(d.form(), Some(Form::Comma));
    }

    #[test]
    fn a_form_seen_read_is_kept_whatever_is_refused_later() {
        let d = Dialect::default();
        d.read(Form::Documented);
        assert_eq!(d.refused(Form::Documented, "t"), Verdict::Fallback);
        assert_eq!(d.form(), Some(Form::Documented));
        let d = Dialect::default();
        assert_eq!(d.refused(Form::Documented, "t"), Verdict::Retry);
        d.read(Form::Comma);
        d.read(Form::Documented);
        assert_eq!(d.form(), Some(Form::Comma));
        assert_eq!(d.refused(Form::Comma, "t"), Verdict::Fallback);
        assert_eq!(d.form(), Some(Form::Comma));
    }
}
