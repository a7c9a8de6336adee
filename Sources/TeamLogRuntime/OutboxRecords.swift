public import TeamLog

/// The records one stream input produced, as kept in the store's outbox until they are published
/// downstream (`Store+Source`): in order, each with its `kind` (the subject it goes to) and its JSON line
/// (no newline). The stored form is a version byte, a count, then per record the kind and the JSON as
/// length-prefixed strings.
public struct OutboxRecords: Sendable, Equatable {
    /// One record.
    public struct Entry: Sendable, Equatable {
        /// The SPEC §4 `kind` (`event`, `rejected`, `delivery`, …).
        public var kind: String
        /// The record's JSON, exactly as `ingest` prints it.
        public var json: [UInt8]

        public init(kind: String, json: [UInt8]) {
            self.kind = kind
            self.json = json
        }
    }

    public var entries: [Entry] = []

    public init(entries: [Entry] = []) {
        self.entries = entries
    }

    /// Appends `record` as `ingest --emit all` prints it.
    public mutating func append(_ record: Record) {
        var w = JSONWriter()
        record.write(into: &w)
        entries.append(Entry(kind: record.kind, json: w.bytes))
    }

    /// The stored form.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 16 + entries.reduce(0) { $0 + $1.json.count + 12 })
        w.u8(1)
        w.varint(UInt64(entries.count))
        for entry in entries {
            w.varint(UInt64(entry.kind.utf8.count))
            w.bytes += entry.kind.utf8
            w.varint(UInt64(entry.json.count))
            w.bytes += entry.json
        }
        return w.bytes
    }

    /// Reads the stored form.
    public init(decoding bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            guard try r.u8() == 1 else { throw DecodeError("unknown outbox record version") }
            let count = try r.count()
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let kind = String(decoding: try r.raw(try r.count()), as: UTF8.self)
                entries.append(Entry(kind: kind, json: Array(try r.raw(try r.count()))))
            }
        }
    }
}
