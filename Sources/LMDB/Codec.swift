/// Encodes a typed key or value to bytes and decodes it back from borrowed bytes.
///
/// Decoders receive bytes that LMDB owns and that are valid only inside the transaction; they must copy.
public protocol LMDBCodec {
    /// The Swift type this codec stores.
    associatedtype Item
    /// Appends the encoding of `item` to `bytes`.
    static func encode(_ item: Item, into bytes: inout [UInt8])
    /// Decodes an item from bytes borrowed from LMDB.
    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> Item
}

extension LMDBCodec {
    /// The encoding of `item` as a fresh array.
    @inlinable
    public static func encoded(_ item: Item) -> [UInt8] {
        var out: [UInt8] = []
        encode(item, into: &out)
        return out
    }
}

/// Big-endian `UInt64`: byte order equals numeric order, so log keys are appended in order (`MDB_APPEND`).
public enum BigEndianUInt64: LMDBCodec {
    public static func encode(_ item: UInt64, into bytes: inout [UInt8]) {
        withUnsafeBytes(of: item.bigEndian) { bytes.append(contentsOf: $0) }
    }

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws -> UInt64 {
        guard bytes.count == 8 else {
            throw LMDBError(
                code: .decoding, message: "expected 8 bytes, got \(bytes.count)", context: "BigEndianUInt64")
        }
        return UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self))
    }
}

/// UTF-8 text.
public enum UTF8String: LMDBCodec {
    public static func encode(_ item: String, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: item.utf8)
    }

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}

/// Raw bytes, copied out of the transaction.
public enum RawBytes: LMDBCodec {
    public static func encode(_ item: [UInt8], into bytes: inout [UInt8]) {
        bytes.append(contentsOf: item)
    }

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws -> [UInt8] {
        Array(bytes)
    }
}
