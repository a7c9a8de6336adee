import TeamLogThreads

/// The output records of the last committed events, by seq, for live subscribers (the HTTP record
/// stream): the writer publishes each batch once it is durable; a subscriber reads from any seq still
/// retained and waits for more. Only the last `capacity` seqs are kept (in memory); an older seq is gone.
public final class RecordWindow: @unchecked Sendable {
    /// The records of one event, as JSON Lines (each ending in a newline): its `event` record, if it was an
    /// op's, and its outputs. A system event (`membersSync`) has outputs only; it may have none.
    public struct Entry: Sendable, Equatable {
        public var seq: UInt64
        public var lines: [UInt8]

        public init(seq: UInt64, lines: [UInt8]) {
            self.seq = seq
            self.lines = lines
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
    private let monitor = Monitor()
    /// A ring of `count` entries whose first is at `head`, holding seqs `first ..< first + count`.
    private var ring: [Entry?]
    private var head = 0
    private var count = 0
    private var first: UInt64
    private var closed = false
    private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0

    /// A window whose first event will be `nextSeq` (the log's head + 1 when the writer starts).
    public init(capacity: Int, nextSeq: UInt64) {
        self.capacity = max(1, capacity)
        ring = []
        first = nextSeq
    }

    /// The seq the next published entry will have.
    public var nextSeq: UInt64 { monitor.locked { first + UInt64(count) } }

    /// The oldest seq retained (`nextSeq` when empty).
    public var oldestSeq: UInt64 { monitor.locked { first } }

    /// Appends the entries of a durable batch (consecutive seqs from `nextSeq`) and wakes the waiters.
    public func publish(_ entries: [Entry]) {
        guard !entries.isEmpty else { return }
        let woken: [CheckedContinuation<Void, Never>] = monitor.locked {
            for entry in entries {
                precondition(entry.seq == first + UInt64(count), "record window: seq \(entry.seq) out of order")
                if ring.count < capacity {
                    ring.append(entry)
                    count += 1
                } else if count < capacity {
                    ring[(head + count) % capacity] = entry
                    count += 1
                } else {
                    ring[head] = entry  // the oldest goes
                    head = (head + 1) % capacity
                    first += 1
                }
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
            return .entries((0..<n).map { ring[(head + offset + $0) % ring.count]! })
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

    private func takeWaiters() -> [CheckedContinuation<Void, Never>] {
        let woken = Array(waiters.values)
        waiters.removeAll()
        return woken
    }
}
