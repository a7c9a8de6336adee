/// Why stored bytes could not be decoded.
public struct DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Reads what `ByteWriter` wrote, from borrowed bytes; every read is bounds-checked.
public struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    /// Offset of the next byte.
    public private(set) var offset: Int = 0

    public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// True when every byte was read.
    public var atEnd: Bool { offset == bytes.count }

    @inline(__always)
    public mutating func u8() throws(DecodeError) -> UInt8 {
        guard offset < bytes.count else { throw DecodeError("truncated at byte \(offset)") }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func bool() throws(DecodeError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let b: throw DecodeError("bad bool \(b) at byte \(offset - 1)")
        }
    }

    @inline(__always)
    public mutating func varint() throws(DecodeError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try u8()
            if shift == 63 && b > 1 { throw DecodeError("varint overflow at byte \(offset - 1)") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
            if shift > 63 { throw DecodeError("varint too long at byte \(offset - 1)") }
        }
    }

    public mutating func zigzag() throws(DecodeError) -> Int64 {
        let v = try varint()
        return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }

    public mutating func u64be() throws(DecodeError) -> UInt64 {
        guard offset + 8 <= bytes.count else { throw DecodeError("truncated u64 at byte \(offset)") }
        defer { offset += 8 }
        return UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    public mutating func count() throws(DecodeError) -> Int {
        let n = try varint()
        guard n <= UInt64(bytes.count - offset) else { throw DecodeError("length \(n) past the end at byte \(offset)") }
        return Int(n)
    }

    public mutating func string() throws(DecodeError) -> String {
        let n = try count()
        defer { offset += n }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + n]), as: UTF8.self)
    }

    /// A string's bytes as `string()` would read them, borrowed (not copied, not made a `String`).
    public mutating func stringBytes() throws(DecodeError) -> UnsafeRawBufferPointer {
        let n = try count()
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + n])
    }

    public mutating func optionalString() throws(DecodeError) -> String? {
        try bool() ? try string() : nil
    }

    public mutating func strings() throws(DecodeError) -> [String] {
        let n = try count()
        var out: [String] = []
        out.reserveCapacity(n)
        for _ in 0..<n { out.append(try string()) }
        return out
    }

    /// Reads `n` raw bytes.
    public mutating func raw(_ n: Int) throws(DecodeError) -> UnsafeRawBufferPointer {
        guard n >= 0, offset + n <= bytes.count else { throw DecodeError("truncated raw bytes at byte \(offset)") }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + n])
    }

    /// Fails unless every byte was read.
    public func expectEnd() throws(DecodeError) {
        if !atEnd { throw DecodeError("\(bytes.count - offset) trailing bytes") }
    }
}
