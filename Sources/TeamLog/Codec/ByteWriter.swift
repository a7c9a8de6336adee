/// Appends the compact binary encoding used by the log and the projections: LEB128 varints,
/// length-prefixed UTF-8 strings, single-byte flags.
public struct ByteWriter: Sendable {
    /// The bytes written so far.
    public var bytes: [UInt8]

    // Inlinable throughout: the store's schema encodes every changed record with these, from another module.
    @inlinable
    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inlinable @inline(__always)
    public mutating func u8(_ v: UInt8) { bytes.append(v) }

    @inlinable @inline(__always)
    public mutating func bool(_ v: Bool) { bytes.append(v ? 1 : 0) }

    /// Unsigned LEB128.
    @inlinable @inline(__always)
    public mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// Signed values, zig-zag encoded so small negatives (-1) stay one byte.
    @inlinable @inline(__always)
    public mutating func zigzag(_ v: Int64) {
        varint(UInt64(bitPattern: (v << 1) ^ (v >> 63)))
    }

    /// Big-endian fixed 8 bytes (keys, where byte order must equal numeric order).
    @inlinable
    public mutating func u64be(_ v: UInt64) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }

    @inlinable
    public mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    @inlinable
    public mutating func optionalString(_ s: String?) {
        bool(s != nil)
        if let s { string(s) }
    }

    @inlinable
    public mutating func strings(_ list: [String]) {
        varint(UInt64(list.count))
        for s in list { string(s) }
    }

    @inlinable
    public mutating func raw(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }
}
