import LMDB
import TeamLog
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The projection records of events committed after the stored checkpoint, for readers on other threads
/// (a server's queries): layered over a read snapshot of the projection environment they give the state
/// as of the last durable commit, so a query reads its writes without waiting for a checkpoint — as Kafka
/// Streams' interactive queries read a state store's cache over its RocksDB files.
///
/// Each commit makes one layer: the records it changed, sorted by key, one (the last) value per key.
/// A newer layer merges into the one before it when it has grown to half its size (the levels of an LSM
/// tree), so a lookup probes O(log n) layers; layers never merge across the seq a checkpoint started at,
/// and go once a committed checkpoint covers them. A set of layers is immutable once published: a reader
/// keeps the one it took while the writer publishes the next.
final class CommittedRecords: Sendable {
    /// Newest first.
    let layers: [RecordLayer]
    /// Seq and time of the last event the layers reach (0 with none).
    let seq: UInt64
    let ts: Int64

    init(layers: [RecordLayer], seq: UInt64, ts: Int64) {
        self.layers = layers
        self.seq = seq
        self.ts = ts
    }
}

/// The records one or more consecutive commits changed.
struct RecordLayer: Sendable {
    struct Entry: Sendable {
        var key: [UInt8]
        /// `nil`: the record was deleted.
        var value: [UInt8]?
    }

    /// Seq and time of the last event whose records the layer holds.
    var seq: UInt64
    var ts: Int64
    /// Per table (`RecordLayer.slot`), unique keys in byte order.
    var tables: [[Entry]]
    var count: Int

    @inline(__always)
    static func slot(_ table: ProjectionTable) -> Int { table.rank }

    /// The layer of `buffer`'s records from index `start` on (in the order they were made: a later value of a
    /// key replaces an earlier one).
    init(_ buffer: RecordBuffer, from start: Int, seq: UInt64, ts: Int64) {
        self.seq = seq
        self.ts = ts
        let changes = (start..<buffer.count).map { buffer.record($0) }
        var tables = [[Entry]](repeating: [], count: ProjectionTable.allCases.count)
        var order = [[Int]](repeating: [], count: tables.count)
        for index in changes.indices { order[Self.slot(changes[index].0)].append(index) }
        var count = 0
        for slot in order.indices where !order[slot].isEmpty {
            // Stable: equal keys keep their order, so the last of a run is the latest value.
            let sorted = order[slot].enumerated().sorted { a, b in
                let c = compareBytes(changes[a.element].1, changes[b.element].1)
                return c != 0 ? c < 0 : a.offset < b.offset
            }
            var entries: [Entry] = []
            entries.reserveCapacity(sorted.count)
            for (_, index) in sorted {
                let (_, key, value) = changes[index]
                if let last = entries.last, last.key == key {
                    entries[entries.count - 1].value = value
                } else {
                    entries.append(Entry(key: key, value: value))
                }
            }
            count += entries.count
            tables[slot] = entries
        }
        self.tables = tables
        self.count = count
    }

    /// `newer` over `older`: every key of both, `newer`'s value where both have one.
    init(merging newer: RecordLayer, over older: RecordLayer) {
        seq = max(newer.seq, older.seq)
        ts = newer.seq >= older.seq ? newer.ts : older.ts
        var tables: [[Entry]] = []
        tables.reserveCapacity(newer.tables.count)
        var count = 0
        for slot in newer.tables.indices {
            let a = newer.tables[slot]
            let b = older.tables[slot]
            if a.isEmpty || b.isEmpty {
                tables.append(a.isEmpty ? b : a)
                count += a.count + b.count
                continue
            }
            var merged: [Entry] = []
            merged.reserveCapacity(a.count + b.count)
            var i = 0
            var j = 0
            while i < a.count && j < b.count {
                let c = compareBytes(a[i].key, b[j].key)
                if c < 0 {
                    merged.append(a[i])
                    i += 1
                } else if c > 0 {
                    merged.append(b[j])
                    j += 1
                } else {
                    merged.append(a[i])
                    i += 1
                    j += 1
                }
            }
            merged.append(contentsOf: a[i...])
            merged.append(contentsOf: b[j...])
            count += merged.count
            tables.append(merged)
        }
        self.tables = tables
        self.count = count
    }

    /// The index of the first entry of `slot` whose key is ≥ `key`.
    func lowerBound(_ slot: Int, _ key: [UInt8]) -> Int {
        let entries = tables[slot]
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if compareBytes(entries[mid].key, key) < 0 { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The entry of `key`, if the layer has one (its value `nil` when the record was deleted).
    func entry(_ slot: Int, _ key: [UInt8]) -> Entry? {
        let index = lowerBound(slot, key)
        let entries = tables[slot]
        guard index < entries.count, entries[index].key == key else { return nil }
        return entries[index]
    }
}

/// The writer's side of `CommittedRecords`: layers made at commits, published once durable, merged and
/// dropped. Only the store's thread calls it; readers take `current` under the lock.
final class ReaderRecords: @unchecked Sendable {
    private let monitor = Monitor()
    private var _current = CommittedRecords(layers: [], seq: 0, ts: 0)
    /// Layers published, newest first (the writer's copy of `_current.layers`).
    private var layers: [RecordLayer] = []
    /// Layers of commits not yet durable, oldest first.
    private var staged: [RecordLayer] = []
    /// The seq the last checkpoint started at: layers at or before it go when it commits, so no layer
    /// after it merges into one of them.
    private var floor: UInt64 = 0

    /// What readers layer over the stored projections now.
    var current: CommittedRecords { monitor.locked { _current } }

    /// Records a commit's changes (not yet durable).
    func stage(_ changes: RecordBuffer, from start: Int, seq: UInt64, ts: Int64) {
        guard start < changes.count else { return }
        staged.append(RecordLayer(changes, from: start, seq: seq, ts: ts))
    }

    /// Publishes the staged layers the log has made durable (seq ≤ `committed`).
    func publish(upTo committed: UInt64) {
        var changed = false
        while let first = staged.first, first.seq <= committed {
            staged.removeFirst()
            layers.insert(first, at: 0)
            while layers.count >= 2, layers[1].seq > floor, layers[0].count * 2 >= layers[1].count {
                let merged = RecordLayer(merging: layers[0], over: layers[1])
                layers.removeFirst(2)
                layers.insert(merged, at: 0)
            }
            changed = true
        }
        if changed { republish() }
    }

    /// A checkpoint started at `seq`: what comes after it stays apart from what it will cover.
    func checkpointStarted(at seq: UInt64) { floor = max(floor, seq) }

    /// A checkpoint at `seq` committed: the layers it covers go.
    func checkpointCommitted(at seq: UInt64) {
        let before = layers.count
        layers.removeAll { $0.seq <= seq }
        if layers.count != before { republish() }
    }

    /// Sets of layers replaced, kept until no reader holds them (`republish`).
    private var retired: [CommittedRecords] = []

    private func republish() {
        let head = layers.first
        var old = CommittedRecords(
            layers: layers, seq: head?.seq ?? monitor.locked { _current.seq },
            ts: head?.ts ?? monitor.locked { _current.ts })
        monitor.locked { swap(&old, &_current) }
        // Freeing a covered layer frees every record in it (~10⁵ arrays after a second of commits): that
        // happens here on the writer's thread, not inside the lock every query takes, and not on a query's
        // thread that happened to hold the last reference (a `ProjectionSnapshot` holds its set). A set
        // still read waits for the next publish (the next commit: an idle writer keeps it until then).
        retired.append(old)
        var index = 0
        while index < retired.count {
            if isKnownUniquelyReferenced(&retired[index]) {
                retired.swapAt(index, retired.count - 1)
                retired.removeLast()
            } else {
                index += 1
            }
        }
    }
}

/// `memcmp` order of two byte strings, then shorter first.
@inline(__always)
func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in compareBytes(pa, pb) } }
}

@inline(__always)
func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = min(a.count, b.count)
    if n > 0 {
        let c = memcmp(a.baseAddress!, b.baseAddress!, n)
        if c != 0 { return Int(c) }
    }
    return a.count - b.count
}

/// One read snapshot of the projections, as queries see them: the stored tables at their checkpoint and,
/// in a writer that serves readers (`Store.serveReaders`), the records committed after it on top — the
/// state as of the last durable commit.
public struct ProjectionSnapshot {
    let txn: Transaction
    let pdbs: ProjectionDatabases
    /// Layers after the stored checkpoint, newest first.
    let layers: [RecordLayer]
    /// The set the layers come from, held while the snapshot lives: the writer frees a replaced set only
    /// once nothing holds it (`ReaderRecords.republish`), so a query never frees a layer itself.
    let records: CommittedRecords?
    /// The seq and event time the snapshot is at.
    public let seq: UInt64
    public let ts: Int64

    init(txn: Transaction, pdbs: ProjectionDatabases, records: CommittedRecords?) throws {
        self.txn = txn
        self.pdbs = pdbs
        self.records = records
        let checkpoint = try pdbs.readCheckpoint(txn)
        if let records, records.seq > checkpoint.seq {
            layers = records.layers.filter { $0.seq > checkpoint.seq }
            seq = records.seq
            ts = records.ts
        } else {
            layers = []
            seq = checkpoint.seq
            ts = checkpoint.ts
        }
    }

    /// The record of `key` in `table`, decoded; `nil` when there is none.
    func value<T>(_ table: ProjectionTable, _ key: [UInt8], _ decode: (UnsafeRawBufferPointer) throws -> T) throws
        -> T?
    {
        if !layers.isEmpty {
            let slot = RecordLayer.slot(table)
            for layer in layers {
                if let entry = layer.entry(slot, key) {
                    guard let value = entry.value else { return nil }
                    return try value.withUnsafeBytes(decode)
                }
            }
        }
        return try key.withUnsafeBytes { k in try txn.withValue(pdbs.table(table), key: k) { try $0.map(decode) } }
    }

    /// Calls `body` with every record of `table` whose key starts with `prefix`, in key order.
    func forEach(
        _ table: ProjectionTable, prefix: [UInt8],
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        // The layers' records under the prefix, the newest value of each key.
        var newer: [RecordLayer.Entry] = []
        if !layers.isEmpty {
            let slot = RecordLayer.slot(table)
            var seen: Set<[UInt8]> = []
            for layer in layers {
                let entries = layer.tables[slot]
                var i = layer.lowerBound(slot, prefix)
                while i < entries.count, entries[i].key.starts(with: prefix) {
                    if seen.insert(entries[i].key).inserted { newer.append(entries[i]) }
                    i += 1
                }
            }
            if layers.count > 1 { newer.sort { compareBytes($0.key, $1.key) < 0 } }
        }
        var next = 0
        func emitNewer(before key: UnsafeRawBufferPointer?) throws -> Bool {
            // Emits the layers' records below `key` (all with nil); true when the next one is `key` itself.
            while next < newer.count {
                let entry = newer[next]
                let order = key.map { k in entry.key.withUnsafeBytes { compareBytes($0, k) } } ?? -1
                if order > 0 { return false }
                next += 1
                if let value = entry.value {
                    try entry.key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try body(k, v) } }
                }
                if order == 0 { return true }
            }
            return false
        }
        try txn.forEach(pdbs.table(table), from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            if try !emitNewer(before: key) { try body(key, value) }
            return true
        }
        _ = try emitNewer(before: nil)
    }

    /// The ordinal (running count within its conversation, or conversation × user) of the last index entry
    /// of `table` under `prefix` with seq ≤ `seq`; 0 when none. One cursor seek and one binary search per
    /// layer: index entries are only ever added, never changed or deleted, so the greatest key of any
    /// source is the answer.
    func ordinal(_ table: ProjectionTable, _ prefix: [UInt8], atOrBefore seq: UInt64) throws -> Int {
        var probe = prefix
        withUnsafeBytes(of: seq.bigEndian) { probe.append(contentsOf: $0) }
        func decode(_ value: UnsafeRawBufferPointer) throws -> Int {
            var r = ByteReader(value)
            _ = try r.u8()
            return Int(try r.varint())
        }
        var best: (key: [UInt8], ordinal: Int)?
        if !layers.isEmpty {
            let slot = RecordLayer.slot(table)
            for layer in layers {
                let entries = layer.tables[slot]
                var i = layer.lowerBound(slot, probe)
                if i < entries.count, entries[i].key == probe { i += 1 }
                while i > 0 {
                    i -= 1
                    let entry = entries[i]
                    guard entry.key.count == probe.count, entry.key.starts(with: prefix) else { break }
                    guard let value = entry.value else { continue }
                    if best.map({ compareBytes($0.key, entry.key) < 0 }) ?? true {
                        best = (entry.key, try value.withUnsafeBytes(decode))
                    }
                    break
                }
            }
        }
        let stored: (key: [UInt8], ordinal: Int)? = try txn.withCursor(pdbs.table(table)) { cursor in
            guard let (key, value) = try cursor.lastAtOrBefore(probe), key.count == probe.count,
                key.starts(with: prefix)
            else { return nil }
            return (Array(key), try decode(value))
        }
        if let stored, best.map({ compareBytes($0.key, stored.key) < 0 }) ?? true { best = stored }
        return best?.ordinal ?? 0
    }
}
