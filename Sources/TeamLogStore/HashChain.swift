import Crypto

/// The log's hash chain: each record's hash is SHA-256 over the previous record's hash, the record's
/// big-endian seq and its encoded event, so a changed, removed or reordered record breaks every hash after it.
public enum HashChain {
    /// Bytes of one hash.
    public static let size = 32
    /// The hash before the first record.
    public static let genesis = [UInt8](repeating: 0, count: size)

    /// The hash of the record `seq` with encoded event `payload`, chained on `previous`.
    public static func next(previous: [UInt8], seq: UInt64, payload: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = SHA256()
        // The previous hash and the seq in one update (each update is a pass through swift-crypto's
        // context and BoringSSL's buffering): the same bytes in the same order, the same hash.
        withUnsafeTemporaryAllocation(byteCount: previous.count + 8, alignment: 8) { header in
            previous.withUnsafeBytes { header.copyMemory(from: $0) }
            header.storeBytes(of: seq.bigEndian, toByteOffset: previous.count, as: UInt64.self)
            hasher.update(bufferPointer: UnsafeRawBufferPointer(header))
        }
        hasher.update(bufferPointer: payload)
        // The digest's bytes copied at once: `Array(digest)` walked its `Sequence` byte by byte (about a
        // third of the instructions of hashing a 100-byte event, callgrind of a batch ingest).
        return hasher.finalize().withUnsafeBytes { Array($0) }
    }

    /// Hex text of a hash, for reports.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
