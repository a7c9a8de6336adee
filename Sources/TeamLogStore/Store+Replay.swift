public import LMDB
public import TeamLog

/// Replaying the log into fresh projections, and checking its hash chain on the way.
extension Store {
    /// A break in the hash chain or an undecodable record.
    public struct ChainProblem: Sendable, Equatable, CustomStringConvertible {
        public var seq: UInt64
        public var message: String
        public var description: String { "seq \(seq): \(message)" }
    }

    /// The outcome of a replay.
    public struct Replay {
        /// The state rebuilt from seq 1 (up to the first problem, if any).
        public var world: World
        /// Events read.
        public var events: Int
        /// The first problem met in the log, if any; replay stops there.
        public var problem: ChainProblem?
        /// The hash after the last good record.
        public var lastHash: [UInt8]
    }

    /// Reads the committed log from seq 1 (through `upTo` when given), verifying each record's seq
    /// continuity and chained hash, and applies every event to a fresh state with this store's config.
    /// `progress` is called every 65,536 events with the count so far.
    public func replay(upTo: UInt64? = nil, progress: ((Int) -> Void)? = nil) throws -> Replay {
        try env.read { txn in try replay(in: txn, upTo: upTo, progress: progress) }
    }

    /// Replays inside a given read snapshot.
    public func replay(in txn: Transaction, upTo: UInt64? = nil, progress: ((Int) -> Void)? = nil) throws -> Replay {
        var world = World(config: world.config)
        world.wantsDeliveries = false
        var hash = HashChain.genesis
        var expected: UInt64 = 1
        var problem: ChainProblem?
        var scratch: [Output] = []
        try txn.forEach(dbs.log.handle) { key, value in
            let seq: UInt64
            do { seq = try BigEndianUInt64.decode(key) } catch {
                problem = ChainProblem(seq: expected, message: "log key is not an 8-byte seq")
                return false
            }
            if let upTo, seq > upTo { return false }
            guard seq == expected else {
                problem = ChainProblem(
                    seq: expected,
                    message: seq > expected ? "record missing (next stored record is \(seq))" : "record out of order (\(seq))")
                return false
            }
            guard let record = LogRecord(value) else {
                problem = ChainProblem(seq: seq, message: "record too short to hold its hash")
                return false
            }
            let next = HashChain.next(previous: hash, seq: seq, payload: record.payload)
            guard next.elementsEqual(record.hash) else {
                problem = ChainProblem(seq: seq, message: "hash mismatch: the record or one before it was changed")
                return false
            }
            let event: Event
            do { event = try EventCodec.decode(seq: seq, record.payload) } catch {
                problem = ChainProblem(seq: seq, message: "undecodable event: \(error)")
                return false
            }
            scratch.removeAll(keepingCapacity: true)
            world.apply(event, into: &scratch)
            hash = next
            expected += 1
            if expected & 0xFFFF == 0 { progress?(Int(expected - 1)) }
            return true
        }
        world.dirty = []
        return Replay(world: world, events: Int(expected - 1), problem: problem, lastHash: hash)
    }

    /// Visits committed events from `from` through `to` in one snapshot, verifying the hash chain from
    /// seq 1 (a break stops the visit and is reported to `problem`).
    public func forEachEvent(from: UInt64 = 1, to: UInt64? = nil, _ body: (Event) throws -> Void,
                             problem: (ChainProblem) -> Void = { _ in }) throws {
        try env.read { txn in
            var hash = HashChain.genesis
            var expected: UInt64 = 1
            var stop: ChainProblem?
            try txn.forEach(dbs.log.handle) { key, value in
                let seq = try BigEndianUInt64.decode(key)
                if let to, seq > to { return false }
                guard seq == expected, let record = LogRecord(value) else {
                    stop = ChainProblem(seq: expected, message: "record missing or out of order")
                    return false
                }
                let next = HashChain.next(previous: hash, seq: seq, payload: record.payload)
                guard next.elementsEqual(record.hash) else {
                    stop = ChainProblem(seq: seq, message: "hash mismatch: the record or one before it was changed")
                    return false
                }
                hash = next
                expected += 1
                if seq >= from { try body(try EventCodec.decode(seq: seq, record.payload)) }
                return true
            }
            if let stop { problem(stop) }
        }
    }

    /// Reads one event by seq.
    public func event(at seq: UInt64) throws -> Event? {
        try env.read { txn in
            try BigEndianUInt64.encoded(seq).withUnsafeBytes { key in
                try txn.withValue(dbs.log.handle, key: key) { value -> Event? in
                    guard let value, let record = LogRecord(value) else { return nil }
                    return try EventCodec.decode(seq: seq, record.payload)
                }
            }
        }
    }

    /// Every stored projection record, table by table, in key order.
    public func storedProjections(in txn: Transaction) throws -> [ProjectionTable: [([UInt8], [UInt8])]] {
        var out: [ProjectionTable: [([UInt8], [UInt8])]] = [:]
        for table in ProjectionTable.allCases {
            var rows: [([UInt8], [UInt8])] = []
            try txn.forEach(dbs.projection(table)) { key, value in
                rows.append((Array(key), Array(value)))
                return true
            }
            out[table] = rows
        }
        return out
    }
}
