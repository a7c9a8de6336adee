import Synchronization
public import TeamLog
import TeamLogThreads

/// The output records of the last committed events, by seq, for live subscribers (the HTTP record
/// stream): the writer publishes each batch once it is durable; a subscriber reads from any seq still
/// retained and waits for more. Only the last `capacity` seqs are kept (in memory), and only as many as
/// fit in `maxBytes` of records (the newest always stays): a delivery to a large team lists every
/// receiver, so a count alone does not bound the memory. An older seq is gone.
public final class RecordWindow: @unchecked Sendable {
    /// The records of one event: its `event` record, if it was an op's, and its outputs. A system event
    /// (`membersSync`) has outputs only; it may have none. Kept as values, not JSON: the writer's thread
    /// never encodes them — the first subscriber to read an entry encodes it (`jsonLines`), and the
    /// others reuse those bytes.
    public struct Entry: Sendable, Equatable {
        public var seq: UInt64
        public var records: [Record]
        /// Bytes of memory the records hold (an estimate, `Record.estimatedSize`): what the window's byte
        /// bound counts.
        public var size: Int
        private let encoded = EncodedOnce()

        public init(seq: UInt64, records: [Record], size: Int? = nil) {
            self.seq = seq
            self.records = records
            self.size = size ?? records.reduce(0) { $0 + $1.estimatedSize }
        }

        /// The records as JSON Lines (each ending in a newline), encoded once for every subscriber.
        public func jsonLines() -> [UInt8] {
            encoded.value { WriterService.encode(records) }
        }

        public static func == (a: Entry, b: Entry) -> Bool {
            a.seq == b.seq && a.records == b.records && a.size == b.size
        }
    }

    /// Bytes made once, by whoever asks first (two readers at the same moment may both make them; the
    /// first stored is kept).
    final class EncodedOnce: Sendable {
        // A `Mutex` lies in the object: the writer makes one per entry, and a `Monitor` would allocate its
        // pthread mutex besides.
        private let bytes = Mutex<[UInt8]?>(nil)

        func value(_ make: () -> [UInt8]) -> [UInt8] {
            if let bytes = bytes.withLock({ $0 }) { return bytes }
            let made = make()
            return bytes.withLock { bytes in
                if let bytes { return bytes }
                bytes = made
                return made
            }
        }
    }

    /// What a read from a seq finds.
    public enum Read: Sendable, Equatable {
        /// Entries from the seq asked for, in order (at most the number asked for).
        case entries([Entry])
        /// Nothing at or after that seq yet.
        case nothingYet
        /// The seq is older than the window: `oldest` is the first seq still retained (or the next one to
        /// come when the window is empty).
        case gone(oldest: UInt64)
        /// The window was closed (the server is stopping).
        case closed
    }

    /// Most seqs retained.
    public let capacity: Int
    /// Most bytes of records retained, as `Entry.size` estimates them (the newest entry is kept whatever
    /// its size).
    public let maxBytes: Int
    private let monitor = Monitor()
    /// The entries retained are `entries[start...]`, holding seqs `first ..< first + count`; the slots
    /// before `start` are dropped ones, compacted away once they are at least half of the array.
    private var entries: [Entry] = []
    private var start = 0
    private var count: Int { entries.count - start }
    /// Bytes of the records retained.
    private var bytes = 0
    private var first: UInt64
    private var closed = false
    private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0

    /// A window whose first event will be `nextSeq` (the log's head + 1 when the writer starts).
    public init(capacity: Int, maxBytes: Int = .max, nextSeq: UInt64) {
        self.capacity = max(1, capacity)
        self.maxBytes = max(0, maxBytes)
        first = nextSeq
    }

    /// The seq the next published entry will have.
    public var nextSeq: UInt64 { monitor.locked { first + UInt64(count) } }

    /// The oldest seq retained (`nextSeq` when empty).
    public var oldestSeq: UInt64 { monitor.locked { first } }

    /// Seqs and bytes of records retained.
    public var retained: (events: Int, bytes: Int) { monitor.locked { (count, bytes) } }

    /// Appends the entries of a durable batch (consecutive seqs from `nextSeq`) and wakes the waiters.
    public func publish(_ batch: [Entry]) {
        guard !batch.isEmpty else { return }
        let woken: [CheckedContinuation<Void, Never>] = monitor.locked {
            for entry in batch {
                precondition(entry.seq == first + UInt64(count), "record window: seq \(entry.seq) out of order")
                if count == capacity { dropOldest() }
                entries.append(entry)
                bytes += entry.size
                while bytes > maxBytes && count > 1 { dropOldest() }
            }
            if start > 0 && start >= entries.count / 2 {
                entries.removeFirst(start)
                start = 0
            }
            return takeWaiters()
        }
        for w in woken { w.resume() }
    }

    /// Entries from `seq` on, at most `limit`.
    public func read(from seq: UInt64, limit: Int = 1024) -> Read {
        monitor.locked {
            if seq < first { return .gone(oldest: first) }
            let end = first + UInt64(count)
            if seq >= end { return closed ? .closed : .nothingYet }
            let n = min(Int(end - seq), max(1, limit))
            let offset = Int(seq - first)
            return .entries(Array(entries[(start + offset)..<(start + offset + n)]))
        }
    }

    /// Returns once an entry at or after `seq` is published, the window is closed, or the task is
    /// cancelled.
    public func wait(for seq: UInt64) async {
        let id: Int = monitor.locked {
            nextWaiter += 1
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let ready: Bool = monitor.locked {
                    if closed || seq < first + UInt64(count) || Task.isCancelled { return true }
                    waiters[id] = c
                    return false
                }
                if ready { c.resume() }
            }
        } onCancel: {
            let c = monitor.locked { waiters.removeValue(forKey: id) }
            c?.resume()
        }
    }

    /// Ends every subscription: reads past the end answer `.closed` and waiters return.
    public func close() {
        let woken = monitor.locked {
            closed = true
            return takeWaiters()
        }
        for w in woken { w.resume() }
    }

    /// Inside the lock: forgets the oldest entry retained.
    private func dropOldest() {
        bytes -= entries[start].size
        entries[start] = Entry(seq: 0, records: [], size: 0)
        start += 1
        first += 1
    }

    private func takeWaiters() -> [CheckedContinuation<Void, Never>] {
        let woken = Array(waiters.values)
        waiters.removeAll()
        return woken
    }
}

extension Record {
    /// About how many bytes of memory the record holds, or its encoding once read: its enum payload, and
    /// per id in its lists an array slot plus the id's bytes when they do not fit in a small string; a
    /// delivery counts an id slot per listed id without listing them (its ids' own lengths are not
    /// walked). Deliveries to large teams dominate: a 2,000-member delivery with everyone alerted counts
    /// ~64 KB, its JSON 40–50 KB.
    public var estimatedSize: Int {
        @inline(__always) func ids(_ list: [Id]) -> Int {
            var n = 32 + list.count * MemoryLayout<Id>.stride
            for id in list where id.utf8.count > 15 { n += id.utf8.count + 32 }
            return n
        }
        let base = 64
        switch self {
        case .rejected(_, _, _, let reason): return base + reason.utf8.count
        case .duplicate, .event: return base
        case .output(.delivery(let d)):
            // Counted from the list lengths, without listing (a team's lists are bitsets until read, and
            // read — encoded once for every subscriber — they take about this much): an id slot per
            // receiver and per alerted one, and a slot and a reason per silenced one.
            let (receivers, silenced) = (d.receiverCount, d.silencedCount)
            return base + 64 + d.messageId.utf8.count + 64 + (2 * receivers - silenced) * MemoryLayout<Id>.stride
                + silenced * (MemoryLayout<Id>.stride + 16)
        case .output(.tip(let tip)):
            return base + 512 + tip.text.utf8.count + (tip.nim.map { ids($0.targetIDs) } ?? 0)
                + (tip.zim.map { ids($0.targetUserIDs) } ?? 0)
        case .output(.signal(let s)): return base + 128 + ids(s.devices) + (s.members.map(ids) ?? 0)
        case .output(.notice): return base + 128
        case .output(.login(let login)): return base + 128 + 128 * (login.offline.count + login.channels.count)
        }
    }
}
