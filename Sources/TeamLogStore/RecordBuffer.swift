import TeamLog

/// Projection records — table, key bytes, and value bytes or a deletion — in one byte arena: what each
/// commit encodes for the next checkpoint (`Store.bufferChanges`) and a checkpoint writes
/// (`CheckpointJob`). Two arrays hold any number of records.
///
/// It replaces an array of `(ProjectionTable, [UInt8], [UInt8]?)` tuples: two heap arrays per record,
/// allocated on the writer's thread at every commit and freed on the checkpointer's, the tuple array
/// copied as it grew, and the checkpointer copying every key into an arena again to sort them (perf, batch
/// ingest of the bench mix: allocation, `memmove`, retain and release of those arrays were the largest
/// part of `appendChanges` on the writer and a sixth of the checkpointer's samples).
struct RecordBuffer: Sendable {
    /// One record: its key at `start` in the arena, its value right after the key.
    struct Entry: Sendable {
        var start: Int
        var keyCount: UInt32
        /// `RecordBuffer.deleted` when the record is to be deleted.
        var valueCount: UInt32
        var table: ProjectionTable
    }

    /// A value length that marks a deletion.
    static let deleted = UInt32.max

    /// The arena: every record's key and value bytes, in the order appended.
    private(set) var arena: ByteWriter
    private(set) var entries: [Entry]

    init(records: Int = 0, bytes: Int = 0) {
        arena = ByteWriter(capacity: bytes)
        entries = []
        entries.reserveCapacity(records)
    }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    /// The arena's size.
    var byteCount: Int { arena.bytes.count }

    /// Appends a record of `table`: `key` writes its key; `value` writes its value and returns `true`, or
    /// writes nothing and returns `false` when the record is to be deleted.
    @inline(__always)
    mutating func append(
        _ table: ProjectionTable, key: (inout ByteWriter) -> Void, value: (inout ByteWriter) -> Bool
    ) {
        let start = arena.bytes.count
        key(&arena)
        let keyEnd = arena.bytes.count
        let present = value(&arena)
        let valueCount = present ? UInt32(arena.bytes.count - keyEnd) : Self.deleted
        if !present && arena.bytes.count > keyEnd { arena.bytes.removeSubrange(keyEnd...) }  // none for a deletion
        entries.append(
            Entry(start: start, keyCount: UInt32(keyEnd - start), valueCount: valueCount, table: table))
    }

    /// Appends every record of `other` after this buffer's (later changes of a key come later).
    mutating func append(contentsOf other: RecordBuffer) {
        let shift = arena.bytes.count
        arena.bytes.append(contentsOf: other.arena.bytes)
        entries.reserveCapacity(entries.count + other.entries.count)
        for var entry in other.entries {
            entry.start += shift
            entries.append(entry)
        }
    }

    /// Calls `body` with the arena's bytes (an entry's key is `bytes[start ..< start + keyCount]`).
    func withArena<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try arena.bytes.withUnsafeBytes(body)
    }

    /// Record `index`'s table, key and value (`nil`: deleted), copied out (tests, the readers' layers).
    func record(_ index: Int) -> (ProjectionTable, [UInt8], [UInt8]?) {
        let entry = entries[index]
        let keyEnd = entry.start + Int(entry.keyCount)
        let key = Array(arena.bytes[entry.start..<keyEnd])
        guard entry.valueCount != Self.deleted else { return (entry.table, key, nil) }
        return (entry.table, key, Array(arena.bytes[keyEnd..<keyEnd + Int(entry.valueCount)]))
    }
}

extension RecordBuffer.Entry {
    /// The key's bytes within `arena`.
    @inline(__always)
    func key(in arena: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: arena[start..<start + Int(keyCount)])
    }

    /// The value's bytes within `arena`; `nil` for a deletion.
    @inline(__always)
    func value(in arena: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard valueCount != RecordBuffer.deleted else { return nil }
        let keyEnd = start + Int(keyCount)
        return UnsafeRawBufferPointer(rebasing: arena[keyEnd..<keyEnd + Int(valueCount)])
    }
}
