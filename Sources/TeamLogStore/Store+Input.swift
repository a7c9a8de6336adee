import LMDB

/// Where a store's `ingest` of a file stands in its input, kept in the log's own transactions: exactly once
/// from a file, without opIds.
///
/// Each commit of `teamlog ingest FILE` (batch or `--follow`) writes, with the batch's events, the input
/// position its lines reach — the byte offset after the last line answered, that line's number and a
/// checksum of its bytes. After a crash at any point the recorded position is exactly the last line whose
/// effects are in the log, so `ingest FILE --resume` seeks there, checks that the file's line ending at
/// that offset is the one recorded (the same input, not another file or a rewritten one), and goes on with
/// the next line, numbering lines as the first run did. Before, an input without opIds could not be
/// resumed after a crash: feeding it again applied its first part twice, and nothing said where to start.
public struct InputPosition: Sendable, Equatable {
    /// Input bytes through the last line answered in a committed batch (its newline included).
    public var offset: UInt64
    /// That line's number (1-based; blank lines count).
    public var line: UInt64
    /// `InputPosition.checksum` of that line's bytes (without its newline and a CR before it); 0 for a line
    /// over the length limit, whose bytes were not kept (then only its newline is checked).
    public var lineChecksum: UInt64
    /// The input as `ingest` was given it (for messages only: a moved file resumes by its content).
    public var path: String

    public init(offset: UInt64, line: UInt64, lineChecksum: UInt64, path: String) {
        self.offset = offset
        self.line = line
        self.lineChecksum = lineChecksum
        self.path = path
    }

    /// A line's checksum: 64-bit words (little-endian) multiplied and folded, then the tail bytes and the
    /// length, finished with MurmurHash3's `fmix64` — about 30 ns for a line of 200 bytes, on the parsing
    /// thread. Part of the stored format: it never changes. Never 0 (0 marks an unchecked line).
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var i = 0
        while i + 8 <= bytes.count {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            h = (h ^ word) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 32
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count {
            tail |= UInt64(bytes[i]) << shift
            shift += 8
            i += 1
        }
        h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h == 0 ? 1 : h
    }

    /// `offset`, `line`, `lineChecksum` (big-endian), then the path's UTF-8 bytes.
    var encoded: [UInt8] {
        BigEndianUInt64.encoded(offset) + BigEndianUInt64.encoded(line) + BigEndianUInt64.encoded(lineChecksum)
            + Array(path.utf8)
    }

    init(decoding bytes: [UInt8]) throws {
        guard bytes.count >= 24 else {
            throw StoreError(code: .corrupted, message: "the store's input position record is \(bytes.count) bytes")
        }
        func number(at start: Int) throws -> UInt64 {
            try bytes[start..<start + 8].withUnsafeBytes { try BigEndianUInt64.decode($0) }
        }
        offset = try number(at: 0)
        line = try number(at: 8)
        lineChecksum = try number(at: 16)
        path = String(decoding: bytes[24...], as: UTF8.self)
    }
}

extension Databases {
    /// The committed input position of a file `ingest`, if one was recorded.
    func readInput(_ txn: Transaction) throws -> InputPosition? {
        guard let bytes = try txn.get(meta, "input") else { return nil }
        return try InputPosition(decoding: bytes)
    }
}

extension Store {
    /// Names the input position the pending ops reach (the last line answered): written with the next
    /// commit, in its transaction. Later calls replace it.
    public func stageInput(_ position: InputPosition) {
        pendingSource.input = position
    }

    /// The input position the log's last commit recorded (`nil`: none — the store was never fed from a
    /// file by `ingest`, or `repair` cut the log since).
    public func inputPosition() throws -> InputPosition? {
        try env.read { [dbs] txn in try dbs.readInput(txn) }
    }
}
