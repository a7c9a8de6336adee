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
    public var string: String

    @inlinable
    public init(_ string: String) { self.string = string }

    /// The id's UTF-8 bytes.
    @inlinable
    public var utf8: String.UTF8View { string.utf8 }

    /// Whether the id has no bytes.
    @inlinable
    public var isEmpty: Bool { string.isEmpty }

    /// Whether the id's bytes start with `prefix`'s.
    @inlinable
    public func hasPrefix(_ prefix: String) -> Bool { string.utf8.starts(with: prefix.utf8) }
}

extension Id: Equatable {
    public static func == (lhs: Id, rhs: Id) -> Bool {
        let a = lhs.string.utf8
        let b = rhs.string.utf8
        guard a.count == b.count else { return false }
        if let equal = a.withContiguousStorageIfAvailable({ pa in
            b.withContiguousStorageIfAvailable { pb in
                pa.count == 0 || memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0
            }
        }), let equal {
            return equal
        }
        return a.elementsEqual(b)
    }
}

extension Id: Hashable {
    public func hash(into hasher: inout Hasher) {
        let u = string.utf8
        let done: Void? = u.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil {
            for byte in u { hasher.combine(byte) }
        }
        hasher.combine(0xFF as UInt8)  // never a UTF-8 byte: ends the id, so concatenations cannot collide
    }
}

extension Id: Comparable {
    /// Byte order (for valid UTF-8, the order of Unicode scalar values).
    public static func < (lhs: Id, rhs: Id) -> Bool {
        let a = lhs.string.utf8
        let b = rhs.string.utf8
        if let result = a.withContiguousStorageIfAvailable({ pa in
            b.withContiguousStorageIfAvailable { pb -> Bool in
                let n = min(pa.count, pb.count)
                let c = n == 0 ? 0 : memcmp(pa.baseAddress!, pb.baseAddress!, n)
                return c != 0 ? c < 0 : pa.count < pb.count
            }
        }), let result {
            return result
        }
        return a.lexicographicallyPrecedes(b)
    }
}

extension Id: ExpressibleByStringLiteral, ExpressibleByStringInterpolation {
    @inlinable
    public init(stringLiteral value: String) { self.string = value }

    @inlinable
    public init(stringInterpolation: DefaultStringInterpolation) {
        self.string = String(stringInterpolation: stringInterpolation)
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
