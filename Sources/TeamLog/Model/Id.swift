#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An id (user, team, channel, message, device, opId, request): its UTF-8 bytes.
///
/// SPEC §1: "Ids are compared byte for byte: no Unicode normalization, no case folding." Swift's `String`
/// compares and hashes by Unicode canonical equivalence, so `café` written precomposed (`caf\u{E9}`) and
/// decomposed (`cafe\u{301}`) are one `String` key but two LMDB keys. `Id` wraps the text and defines
/// equality, hashing and order on the UTF-8 bytes alone, so every dictionary of the domain, every stored
/// key and every query agree on what "the same id" means, whatever run boundaries fall where.
/// Order is byte order, which for valid UTF-8 is also Unicode scalar order.
@frozen
public struct Id: Sendable {
    /// The id as text (its bytes are the identity).
    public let string: String
    /// Whether every byte is ASCII. Then canonical equivalence is byte equality, so `String`'s own
    /// equality, hashing and order (fast paths of the standard library for ASCII) give the byte answers;
    /// only ids with other bytes take the byte-wise paths. (Profiled: byte-wise comparison of every id
    /// cost 5% more instructions per ingested op than `String`'s ASCII fast paths.)
    @usableFromInline let isASCII: Bool

    @inlinable
    public init(_ string: String) {
        self.string = string
        isASCII =
            string.utf8.withContiguousStorageIfAvailable { bytes in bytes.allSatisfy { $0 < 0x80 } }
            ?? string.utf8.allSatisfy { $0 < 0x80 }
    }

    /// The id's UTF-8 bytes.
    @inlinable
    public var utf8: String.UTF8View { string.utf8 }

    /// Whether the id has no bytes.
    @inlinable
    public var isEmpty: Bool { string.isEmpty }

    /// Whether the id's bytes start with `prefix`'s.
    @inlinable
    public func hasPrefix(_ prefix: String) -> Bool { string.utf8.starts(with: prefix.utf8) }

    /// `memcmp` order of two strings' UTF-8 bytes: negative, zero or positive.
    @usableFromInline
    static func compareBytes(_ a: String, _ b: String) -> Int {
        let ua = a.utf8
        let ub = b.utf8
        if let result = ua.withContiguousStorageIfAvailable({ pa in
            ub.withContiguousStorageIfAvailable { pb -> Int in
                let n = min(pa.count, pb.count)
                let c = n == 0 ? 0 : Int(memcmp(pa.baseAddress!, pb.baseAddress!, n))
                return c != 0 ? c : pa.count - pb.count
            }
        }), let result {
            return result
        }
        for (x, y) in zip(ua, ub) where x != y { return Int(x) - Int(y) }
        return ua.count - ub.count
    }

    @usableFromInline
    static func hashBytes(_ s: String, into hasher: inout Hasher) {
        let u = s.utf8
        let done: Void? = u.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil {
            for byte in u { hasher.combine(byte) }
        }
        hasher.combine(0xFF as UInt8)  // never a UTF-8 byte: ends the id, so concatenations cannot collide
    }
}

extension Id: Equatable {
    @inlinable
    public static func == (lhs: Id, rhs: Id) -> Bool {
        if lhs.isASCII && rhs.isASCII { return lhs.string == rhs.string }
        return lhs.isASCII == rhs.isASCII && compareBytes(lhs.string, rhs.string) == 0
    }
}

extension Id: Hashable {
    @inlinable
    public func hash(into hasher: inout Hasher) {
        // Equal ids have equal bytes, hence the same `isASCII`, hence the same path.
        if isASCII { hasher.combine(string) } else { Self.hashBytes(string, into: &hasher) }
    }

    /// The hash `Dictionary` and `Set` use for an `Id` key: `Id.bytesHash` of its bytes under the table's
    /// seed, instead of feeding `Hasher` (SipHash-1-3). Every table of the writer is keyed by ids, and
    /// `Hasher`'s set-up, rounds and finalization were ~9% of the writer thread's samples (perf, batch
    /// ingest of the bench mix). Ids come from clients, so the hash stays seeded: the seed is the table's,
    /// which the standard library derives from its per-process random seed (deterministic only under
    /// `SWIFT_DETERMINISTIC_HASHING`, as `Hasher` is). Ids inside compound keys still go through
    /// `hash(into:)`; both are functions of the bytes alone, so both agree with `==`.
    @inlinable
    public func _rawHashValue(seed: Int) -> Int {
        Int(truncatingIfNeeded: Self.bytesHash(string, seed: UInt64(truncatingIfNeeded: seed)))
    }

    /// A seeded 64-bit hash of `s`'s UTF-8 bytes: 8 bytes at a time, each folded in by a 64×64→128-bit
    /// multiply whose halves are xored (the mixing step of wyhash and of Rust's foldhash), the length in
    /// the last step. A few nanoseconds for an id of ~16 bytes.
    @inlinable
    public static func bytesHash(_ s: String, seed: UInt64) -> UInt64 {
        if let h = s.utf8.withContiguousStorageIfAvailable({ bytesHash(UnsafeRawBufferPointer($0), seed: seed) }) {
            return h
        }
        return Array(s.utf8).withUnsafeBytes { bytesHash($0, seed: seed) }  // not contiguous (bridged)
    }

    @inlinable
    static func bytesHash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        @inline(__always)
        func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let product = a.multipliedFullWidth(by: b)
            return product.high ^ product.low
        }
        let k0: UInt64 = 0xa076_1d64_78bd_642f
        let k1: UInt64 = 0xe703_7ed1_a0b4_28db
        let n = bytes.count
        var h = seed ^ k0
        if let base = bytes.baseAddress {
            var i = 0
            while i + 8 <= n {
                h = fold(h ^ base.loadUnaligned(fromByteOffset: i, as: UInt64.self), k1)
                i += 8
            }
            if i < n {
                var tail: UInt64 = 0
                var shift: UInt64 = 0
                while i < n {
                    tail |= UInt64(base.load(fromByteOffset: i, as: UInt8.self)) << shift
                    shift &+= 8
                    i += 1
                }
                h = fold(h ^ tail, k1)
            }
        }
        return fold(h ^ UInt64(n), k0 ^ seed)
    }
}

extension Id: Comparable {
    /// Byte order (for valid UTF-8, the order of Unicode scalar values; for ASCII, `String`'s order).
    @inlinable
    public static func < (lhs: Id, rhs: Id) -> Bool {
        if lhs.isASCII && rhs.isASCII { return lhs.string < rhs.string }
        return compareBytes(lhs.string, rhs.string) < 0
    }
}

extension Id: ExpressibleByStringLiteral, ExpressibleByStringInterpolation {
    @inlinable
    public init(stringLiteral value: String) { self.init(value) }

    @inlinable
    public init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }
}

extension Id: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { string }
    public var debugDescription: String { string.debugDescription }
}

extension Id: TextOutputStreamable {
    public func write(to target: inout some TextOutputStream) { target.write(string) }
}

extension JSONValue {
    /// An id as a JSON string (its bytes as they are).
    public static func string(_ id: Id) -> JSONValue { .string(id.string) }

    /// Ids as a JSON array of strings.
    public static func ids(_ ids: [Id]) -> JSONValue { .array(ids.map { .string($0.string) }) }
}

extension JSONWriter {
    /// Writes an id as a JSON string.
    public mutating func writeString(_ id: Id) { writeString(id.string) }
}

extension ByteWriter {
    /// Writes an id: its length-prefixed UTF-8 bytes.
    public mutating func string(_ id: Id) { string(id.string) }

    public mutating func optionalString(_ id: Id?) {
        bool(id != nil)
        if let id { string(id.string) }
    }

    public mutating func strings(_ list: [Id]) {
        varint(UInt64(list.count))
        for id in list { string(id.string) }
    }
}

extension ByteReader {
    /// Reads an id written by `ByteWriter.string(_:)`.
    public mutating func id() throws(DecodeError) -> Id { Id(try string()) }

    public mutating func optionalId() throws(DecodeError) -> Id? { try optionalString().map { Id($0) } }

    public mutating func ids() throws(DecodeError) -> [Id] { try strings().map { Id($0) } }
}
