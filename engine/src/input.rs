//! What an input adapter hands the driver: messages, or lines still in the buffers they
//! were read into, made into messages on the worker that processes them.
//!
//! Making a line's message is an allocation of its size, a copy and a second allocation
//! (the message). Done on the input's thread, that is most of its work (on one worker it
//! runs beside the worker, on two it takes from both), every message is then first read on
//! another core, and its frees go back across threads. A [`BufferedLines`] batch carries
//! the read buffers and where each line lies in them, and [`BufferedLines::into_messages`]
//! copies each line out into an allocation of its own on whichever thread applies it: the
//! copies are parallel and their memory is local. Each line still gets its own allocation,
//! so a value that a stateful transform keeps pins its line, never a read buffer.

use std::sync::Arc;

use bytes::Bytes;

use crate::ack::{AckGroup, FailureWatch};
use crate::message::Message;

/// The bytes a batch counts for in a read-ahead bound (`driver::ReadAhead`): its
/// messages' data lengths.
fn batch_bytes(batch: &[Message]) -> usize {
    batch.iter().map(|m| m.data().len()).sum()
}

/// A batch from an input adapter.
pub enum InputBatch {
    /// Messages made by the adapter.
    Messages(Vec<Message>),
    /// Lines still in their read buffers.
    Lines(BufferedLines),
}

impl From<Vec<Message>> for InputBatch {
    fn from(msgs: Vec<Message>) -> Self {
        InputBatch::Messages(msgs)
    }
}

impl From<BufferedLines> for InputBatch {
    fn from(lines: BufferedLines) -> Self {
        InputBatch::Lines(lines)
    }
}

impl InputBatch {
    /// How many messages it holds or makes.
    pub fn len(&self) -> usize {
        match self {
            InputBatch::Messages(m) => m.len(),
            InputBatch::Lines(l) => l.len(),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its data messages (what is not ctrl).
    pub fn data_messages(&self) -> usize {
        match self {
            InputBatch::Messages(m) => m.iter().filter(|m| !m.is_ctrl()).count(),
            InputBatch::Lines(l) => l.len(),
        }
    }

    /// The bytes of its messages' data (what a reader counts in the read-ahead bound).
    pub fn data_bytes(&self) -> usize {
        match self {
            InputBatch::Messages(m) => batch_bytes(m),
            InputBatch::Lines(l) => l.bytes,
        }
    }

    /// Splits it in two: `self` keeps the first `at` messages, the rest is returned.
    pub fn split_off(&mut self, at: usize) -> InputBatch {
        match self {
            InputBatch::Messages(m) => InputBatch::Messages(m.split_off(at.min(m.len()))),
            InputBatch::Lines(l) => InputBatch::Lines(l.split_off(at)),
        }
    }

    /// Its messages, made here when they are lines.
    pub fn into_messages(self) -> Vec<Message> {
        match self {
            InputBatch::Messages(m) => m,
            InputBatch::Lines(l) => l.into_messages(),
        }
    }

    /// Marks every message failed for `reason` (a batch that will not be processed).
    pub fn fail(self, reason: &str) {
        for m in self.into_messages() {
            m.fail_acks(reason);
        }
    }
}

/// Where one line lies: its buffer (an index into the batch's buffers) and its range.
#[derive(Debug, Clone, Copy)]
struct LineAt {
    buffer: usize,
    start: usize,
    end: usize,
}

/// Consecutive lines of one input, numbered from `first`, in the buffers they were read
/// into (see the module comment). Each line's message carries a token of an
/// [`AckGroup`] telling the input's [`FailureWatch`] of its failure by its number.
pub struct BufferedLines {
    buffers: Vec<Bytes>,
    lines: Vec<LineAt>,
    first: u64,
    bytes: usize,
    watch: Arc<dyn FailureWatch>,
}

impl BufferedLines {
    /// An empty batch whose first line will be number `first`, failures told to `watch`.
    pub fn new(first: u64, watch: Arc<dyn FailureWatch>) -> BufferedLines {
        BufferedLines::with_capacity(first, watch, 0)
    }

    /// [`BufferedLines::new`], with room for `lines` lines.
    pub fn with_capacity(first: u64, watch: Arc<dyn FailureWatch>, lines: usize) -> BufferedLines {
        BufferedLines {
            buffers: Vec::new(),
            lines: Vec::with_capacity(lines),
            first,
            bytes: 0,
            watch,
        }
    }

    /// Adds the next line: `range` of the buffer that the next [`BufferedLines::seal`]
    /// gives (the reader knows where a line lies before its buffer is done with).
    pub fn push(&mut self, range: std::ops::Range<usize>) {
        self.bytes += range.len();
        self.lines.push(LineAt {
            buffer: self.buffers.len(),
            start: range.start,
            end: range.end,
        });
    }

    /// The lines pushed since the last seal lie in `buffer`; without such lines it is not
    /// kept. (A range outside its buffer is a reader's bug, found when the messages are
    /// made.)
    pub fn seal(&mut self, buffer: Bytes) {
        if self
            .lines
            .last()
            .is_some_and(|l| l.buffer == self.buffers.len())
        {
            debug_assert!(
                self.lines
                    .iter()
                    .rev()
                    .take_while(|l| l.buffer == self.buffers.len())
                    .all(|l| l.start <= l.end && l.end <= buffer.len())
            );
            self.buffers.push(buffer);
        }
    }

    /// How many lines it holds.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The bytes of its lines.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The number of the line after its last.
    pub fn next_line(&self) -> u64 {
        self.first + self.lines.len() as u64
    }

    /// Splits it in two: `self` keeps the first `at` lines, the rest (sharing the buffers)
    /// is returned.
    pub fn split_off(&mut self, at: usize) -> BufferedLines {
        let at = at.min(self.lines.len());
        let lines = self.lines.split_off(at);
        let bytes = lines.iter().map(|l| l.end - l.start).sum();
        self.bytes -= bytes;
        BufferedLines {
            buffers: self.buffers.clone(),
            lines,
            first: self.first + at as u64,
            bytes,
            watch: self.watch.clone(),
        }
    }

    /// The lines' messages, each line copied into an allocation of its own size, with the
    /// token of its number in one group for the batch (a group per 2^32 - 1 lines, the
    /// places one group tells apart), which tells the watch when the batch's lines are
    /// finished ([`FailureWatch::finished`]).
    pub fn into_messages(self) -> Vec<Message> {
        const GROUP_SPAN: usize = u32::MAX as usize;
        let mut out = Vec::with_capacity(self.lines.len());
        let mut first = self.first;
        for lines in self.lines.chunks(GROUP_SPAN) {
            // At most `GROUP_SPAN` lines: the span fits.
            let span = u32::try_from(lines.len()).unwrap_or(u32::MAX);
            let group = AckGroup::spanning(first, span, self.watch.clone());
            for (offset, at) in (0..=u32::MAX).zip(lines) {
                let text = &self.buffers[at.buffer][at.start..at.end];
                let mut m = Message::new(text.to_vec());
                m.add_ack(group.token_at(offset));
                out.push(m);
            }
            first += lines.len() as u64;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::FailuresSeen;

    fn lines(first: u64, watch: &Arc<FailuresSeen>) -> BufferedLines {
        let mut b = BufferedLines::new(first, watch.clone());
        b.push(0..3);
        b.push(4..7);
        b.seal(Bytes::from_static(b"one\ntwo\n"));
        // A buffer without lines of its own is not kept.
        b.seal(Bytes::from_static(b"unused"));
        b.push(0..5);
        b.seal(Bytes::from_static(b"three"));
        assert_eq!(b.buffers.len(), 2);
        b
    }

    fn texts(msgs: &[Message]) -> Vec<String> {
        msgs.iter()
            .map(|m| String::from_utf8(m.data().to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn lines_become_messages_in_order_across_buffers() {
        let watch = Arc::new(FailuresSeen::default());
        let b = lines(7, &watch);
        assert_eq!((b.len(), b.bytes(), b.next_line()), (3, 11, 10));
        assert_eq!(texts(&b.into_messages()), ["one", "two", "three"]);
    }

    #[test]
    fn split_parts_keep_their_lines_bytes_and_numbers() {
        let watch = Arc::new(FailuresSeen::default());
        for at in 0..=4 {
            let mut front = InputBatch::from(lines(7, &watch));
            let back = front.split_off(at);
            let kept = at.min(3);
            assert_eq!((front.len(), back.len()), (kept, 3 - kept), "at {at}");
            assert_eq!(front.data_bytes() + back.data_bytes(), 11, "at {at}");
            let mut all = texts(&front.into_messages());
            all.extend(texts(&back.into_messages()));
            assert_eq!(all, ["one", "two", "three"], "at {at}");
        }
        let mut front = lines(7, &watch);
        let back = front.split_off(1);
        InputBatch::from(back).fail("stopped");
        assert_eq!(
            *watch.0.lock().unwrap(),
            [(8, "stopped".to_string()), (9, "stopped".to_string())]
        );
    }

    #[test]
    fn a_failed_message_tells_its_line_number() {
        let watch = Arc::new(FailuresSeen::default());
        let msgs = lines(41, &watch).into_messages();
        msgs[2].fail_acks("no key");
        assert_eq!(*watch.0.lock().unwrap(), [(43, "no key".to_string())]);
    }

    #[test]
    fn message_batches_count_their_data_and_bytes() {
        let mut b = InputBatch::from(vec![Message::new("ab"), Message::ctrl()]);
        assert_eq!((b.len(), b.data_messages(), b.data_bytes()), (2, 1, 2));
        let back = b.split_off(1);
        assert_eq!((b.len(), back.len()), (1, 1));
        assert!(BufferedLines::new(1, Arc::new(FailuresSeen::default())).is_empty());
        assert!(InputBatch::from(Vec::new()).is_empty());
    }
}
