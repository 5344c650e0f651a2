//! Records in time order: the key that sorts a record by its time stamp
//! ([`TimeOrdered`]), and the queue that holds keys until no later record
//! can precede them ([`TimeQueue`]), for replay's rounds and the live
//! stream alike.

/// Bits of [`TimeOrdered`]'s key that hold the record's offset; the
/// event's index rides above them (readers allow at most
/// [`crate::format::perf_data::MAX_EVENTS`] events).
const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// A record's place in time order: its time, then (offset | event index
/// << 48), so one sort orders records by time; ties by event index, and of
/// one event in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeOrdered {
    /// The record's time stamp (0 without one).
    pub time: u64,
    key: u64,
}

impl TimeOrdered {
    /// The record at byte `offset` of its buffer, of event `attr`.
    pub fn new(time: u64, offset: usize, attr: usize) -> TimeOrdered {
        TimeOrdered {
            time,
            key: offset as u64 | (attr as u64) << OFFSET_BITS,
        }
    }

    /// Byte offset of the record in its buffer.
    pub fn offset(self) -> usize {
        (self.key & OFFSET_MASK) as usize
    }

    /// Index of the record's event.
    pub fn attr(self) -> usize {
        (self.key >> OFFSET_BITS) as usize
    }

    /// The same record, moved to `offset`.
    pub fn moved_to(self, offset: usize) -> TimeOrdered {
        TimeOrdered::new(self.time, offset, self.attr())
    }
}

/// Records waiting for their turn: pushed in any order, taken out sorted
/// once every record up to a time is known to be in.
#[derive(Debug, Default)]
pub struct TimeQueue {
    keys: Vec<TimeOrdered>,
}

impl TimeQueue {
    /// Queues a record.
    pub fn push(&mut self, key: TimeOrdered) {
        self.keys.push(key);
    }

    /// Hands `take` the records stamped at or before `limit` (None: none),
    /// in time order, and keeps the others.
    pub fn pop_through(&mut self, limit: Option<u64>, take: impl FnOnce(&[TimeOrdered])) {
        // The keys come nearly in order (pfprof writes records in time
        // order but for the fault entries, stamped a little earlier; perf
        // in a run per CPU): the stable sort merges such runs, where the
        // unstable one partitions them all over again (11% of a busy
        // host's replay against 3%). No two keys are equal.
        self.keys.sort();
        let ready = limit.map_or(0, |limit| self.keys.partition_point(|k| k.time <= limit));
        take(&self.keys[..ready]);
        self.keys.drain(..ready);
    }

    /// The records still waiting (in time order after a
    /// [`pop_through`](Self::pop_through)), to move them.
    pub fn waiting_mut(&mut self) -> &mut [TimeOrdered] {
        &mut self.keys
    }

    /// How many records wait.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether none does.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys sort by time, then by event, then by offset (file order); the
    /// event rides along unchanged, also when the record moves.
    #[test]
    fn time_order_then_file_order() {
        let mut keys = [
            TimeOrdered::new(5, 300, 1),
            TimeOrdered::new(5, 200, 1),
            TimeOrdered::new(5, 100, 2),
            TimeOrdered::new(3, 900, 0),
        ];
        keys.sort_unstable();
        let seen: Vec<_> = keys
            .iter()
            .map(|k| (k.time, k.offset(), k.attr()))
            .collect();
        assert_eq!(seen, [(3, 900, 0), (5, 200, 1), (5, 300, 1), (5, 100, 2)]);
        let moved = keys[2].moved_to(8);
        assert_eq!((moved.time, moved.offset(), moved.attr()), (5, 8, 1));
        let big = TimeOrdered::new(0, (1 << 48) - 1, 0xffff);
        assert_eq!((big.offset(), big.attr()), ((1 << 48) - 1, 0xffff));
    }

    /// The queue hands out, sorted, what is at or before the limit (the
    /// limit itself included), keeps the rest in order, and nothing for
    /// no limit.
    #[test]
    fn queue_hands_out_through_a_limit() {
        let mut queue = TimeQueue::default();
        for (offset, time) in [(0, 30), (8, 10), (16, 20), (24, 40)] {
            queue.push(TimeOrdered::new(time, offset, 0));
        }
        let times = |keys: &[TimeOrdered]| keys.iter().map(|k| k.time).collect::<Vec<_>>();
        let mut out = Vec::new();
        queue.pop_through(None, |ready| out.push(times(ready)));
        queue.pop_through(Some(20), |ready| out.push(times(ready)));
        assert_eq!(out, [vec![], vec![10, 20]]);
        assert_eq!(times(queue.waiting_mut()), [30, 40]);
        assert_eq!(queue.len(), 2);
        queue.pop_through(Some(u64::MAX), |ready| out.push(times(ready)));
        assert_eq!(out[2], [30, 40]);
        assert!(queue.is_empty());
    }
}
