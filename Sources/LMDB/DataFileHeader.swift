#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// LMDB's header of `data.mdb` — its two meta pages — read with plain `pread` before the file is mapped,
/// and checked, so that a damaged or short file is refused with an error instead of killing the process
/// with SIGBUS or SIGSEGV once LMDB maps it and follows its page numbers.
///
/// Layout (LMDB 0.9, 64-bit, `mdb.c`): pages 0 and 1 each start with a 16-byte page header
/// (`mp_pgno` u64, `mp_pad` u16, `mp_flags` u16 with `P_META` = 0x08, two u16), then `MDB_meta`:
/// `mm_magic` u32 = 0xBEEFC0DE, `mm_version` u32 = 1, `mm_address` u64, `mm_mapsize` u64, `mm_dbs[2]`
/// (free pages, main; 48 bytes each: `md_pad` u32 — the page size in the free DB's —, `md_flags` u16,
/// `md_depth` u16, branch/leaf/overflow page counts, entries, `md_root` u64), `mm_last_pg` u64,
/// `mm_txnid` u64. Native byte order. The meta with the higher txnid is the current one; commit `n`
/// writes meta page `n & 1`, so the two txnids differ by exactly one once anything was committed.
public struct DataFileHeader: Sendable, Equatable {
    /// One meta page.
    public struct Meta: Sendable, Equatable {
        /// The transaction that wrote it (0: none yet).
        public var txnid: UInt64
        /// The last page in use.
        public var lastPage: UInt64
        /// The map size recorded by the writer.
        public var mapSize: UInt64
        /// Root page of the free-page database and of the main database (`nil`: empty).
        public var freeRoot: UInt64?
        public var mainRoot: UInt64?
        /// B-tree depths of the same.
        public var freeDepth: Int
        public var mainDepth: Int
    }

    /// Page size in bytes.
    public var pageSize: Int
    /// Length of `data.mdb` in bytes (taken after the metas were read).
    public var fileSize: Int
    /// Meta pages 0 and 1.
    public var metas: [Meta]

    /// The meta LMDB will use: the one with the higher txnid.
    public var current: Meta { metas[1].txnid > metas[0].txnid ? metas[1] : metas[0] }

    /// Whether LMDB initialized the file but no transaction ever committed (an interrupted creation).
    public var neverCommitted: Bool { metas.allSatisfy { $0.txnid == 0 } }

    /// Bytes the file must have for every page the current meta counts as in use.
    public var requiredSize: Int { Int(current.lastPage + 1) * pageSize }

    static let magic: UInt32 = 0xBEEF_C0DE
    static let dataVersion: UInt32 = 1
    static let metaFlag: UInt16 = 0x08
    static let branchFlag: UInt16 = 0x01
    static let leafFlag: UInt16 = 0x02
    static let invalidPage = UInt64.max
    /// LMDB's cursor stack: no tree is deeper.
    static let maxDepth = 32
    static let headerBytes = 16 + 152

    /// Reads and checks the header of `directory/data.mdb`: `nil` when there is no such file or it is empty.
    ///
    /// Throws `.truncated` when the file is shorter than the current meta says, `.invalid` when the first page
    /// is not an LMDB meta page, `.versionMismatch` for another LMDB data version, and `.corrupted` when a
    /// meta fails a consistency check (page numbers beyond the last page, txnids that do not pair, a root
    /// that is not a tree page).
    public static func read(directory: String) throws -> DataFileHeader? {
        var attempt = 1
        while true {
            do {
                return try readOnce(directory: directory)
            } catch let error as LMDBError where attempt < 3 && (error.code == .corrupted || error.code == .truncated) {
                // Without a reader slot a writer may commit — and reuse the pages of the meta just read —
                // while this reads; a damaged file fails the same way again.
                attempt += 1
            }
        }
    }

    private static func readOnce(directory: String) throws -> DataFileHeader? {
        let path = directory + "/data.mdb"
        guard let fd = try openDataFile(path, O_RDONLY) else { return nil }
        defer { close(fd) }
        var first = [UInt8](repeating: 0, count: headerBytes)
        let n = try readFully(fd, &first, at: 0, path: path)
        if n == 0 { return nil }
        guard n == headerBytes, field(first, 10, UInt16.self) & metaFlag != 0,
            field(first, 16, UInt32.self) == magic
        else {
            throw LMDBError(
                code: .invalid, message: "not an LMDB data file (no LMDB meta page at its start)",
                context: "read header \(path)")
        }
        let pageSize = Int(field(first, 40, UInt32.self))
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
            throw corrupted(path, "meta page 0 records an impossible page size \(pageSize)")
        }
        var second = [UInt8](repeating: 0, count: headerBytes)
        let m = try readFully(fd, &second, at: pageSize, path: path)
        guard m == headerBytes else {
            throw LMDBError(
                code: .truncated,
                message: "\(fileSize(fd)) bytes, shorter than LMDB's two meta pages (\(2 * pageSize) bytes)",
                context: "read header \(path)")
        }
        var metas: [Meta] = []
        for (i, page) in [first, second].enumerated() {
            guard field(page, 0, UInt64.self) == UInt64(i), field(page, 10, UInt16.self) & metaFlag != 0,
                field(page, 16, UInt32.self) == magic
            else { throw corrupted(path, "meta page \(i) is damaged (page number, flags or magic)") }
            let version = field(page, 20, UInt32.self)
            guard version == dataVersion else {
                throw LMDBError(
                    code: .versionMismatch,
                    message: "LMDB data version \(version); this LMDB reads version \(dataVersion)",
                    context: "read header \(path)")
            }
            func root(_ db: Int) -> UInt64? {
                let r = field(page, 40 + 48 * db + 40, UInt64.self)
                return r == invalidPage ? nil : r
            }
            metas.append(
                Meta(
                    txnid: field(page, 144, UInt64.self), lastPage: field(page, 136, UInt64.self),
                    mapSize: field(page, 32, UInt64.self), freeRoot: root(0), mainRoot: root(1),
                    freeDepth: Int(field(page, 40 + 6, UInt16.self)), mainDepth: Int(field(page, 88 + 6, UInt16.self))))
        }
        let (t0, t1) = (metas[0].txnid, metas[1].txnid)
        guard (t0 == 0 && t1 == 0) || (t0 > t1 ? t0 - t1 : t1 - t0) == 1 else {
            throw corrupted(path, "the meta pages' transaction ids \(t0) and \(t1) do not pair")
        }
        var header = DataFileHeader(pageSize: pageSize, fileSize: 0, metas: metas)
        let current = header.current
        guard current.lastPage >= 1, current.lastPage < UInt64(Int.max / pageSize) else {
            throw corrupted(path, "the current meta's last page \(current.lastPage) is impossible")
        }
        // Taken after the metas: a writer writes a transaction's pages before its meta, so a concurrent
        // commit can only make the file longer than the meta just read needs.
        header.fileSize = fileSize(fd)
        if header.fileSize < header.requiredSize {
            throw LMDBError(
                code: .truncated,
                message: "\(header.fileSize) bytes, but its header (transaction \(current.txnid)) uses pages up to "
                    + "\(current.lastPage): \(header.requiredSize) bytes",
                context: "read header \(path)")
        }
        for (name, root, depth) in [("free-page", current.freeRoot, current.freeDepth),
                                    ("main", current.mainRoot, current.mainDepth)] {
            guard let root else { continue }
            guard root >= 2, root <= current.lastPage, depth >= 1, depth <= maxDepth else {
                throw corrupted(path, "the current meta's \(name) database root (page \(root), depth \(depth)) is impossible")
            }
            // The root page must say it is that page, and a tree page.
            var page = [UInt8](repeating: 0, count: 16)
            guard try readFully(fd, &page, at: Int(root) * pageSize, path: path) == 16,
                field(page, 0, UInt64.self) == root,
                field(page, 10, UInt16.self) & (branchFlag | leafFlag) != 0
            else {
                throw corrupted(path, "the current meta's \(name) database root, page \(root), is not a tree page")
            }
        }
        return header
    }

    /// The two meta pages' transaction ids, read raw (no check of what they name): `nil` when the file is
    /// missing, empty or not an LMDB data file. For deciding whether to roll back, before `read` checks a
    /// meta that may name pages a power loss never wrote.
    public static func metaTransactionIDs(directory: String) throws -> (UInt64, UInt64)? {
        let path = directory + "/data.mdb"
        guard let fd = try openDataFile(path, O_RDONLY) else { return nil }
        defer { close(fd) }
        guard let (first, second, _) = try rawMetaPages(fd, path: path) else { return nil }
        return (field(first, 144, UInt64.self), field(second, 144, UInt64.self))
    }

    /// Makes the older meta page the current one again, by copying its `MDB_meta` over the newer one's (page
    /// headers kept), and syncs: the environment opens at the transaction before the newest. For a commit
    /// made without sync (`Environment.withUnsyncedCommit`) that a power loss may have torn — its meta on
    /// disk, some of its pages not: LMDB never writes a transaction's pages over the pages of the one
    /// before it, so the older meta still names a whole tree (what `MDB_PREVSNAPSHOT` of later LMDB
    /// versions does at open). Call only with the environment closed everywhere (after a reboot, before
    /// it is opened). Returns the transaction id now current.
    @discardableResult
    public static func rollBackUnflushedMeta(directory: String) throws -> UInt64 {
        let path = directory + "/data.mdb"
        guard let fd = try openDataFile(path, O_RDWR) else {
            throw LMDBError(code: .system(ENOENT), message: String(cString: strerror(ENOENT)), context: "open \(path)")
        }
        defer { close(fd) }
        guard let (first, second, pageSize) = try rawMetaPages(fd, path: path) else {
            throw LMDBError(code: .invalid, message: "not an LMDB data file", context: "roll back \(path)")
        }
        let (t0, t1) = (field(first, 144, UInt64.self), field(second, 144, UInt64.self))
        guard t0 != t1 else { return t0 }
        let (older, newerOffset) = t0 < t1 ? (first, pageSize) : (second, 0)
        var meta = Array(older[16..<headerBytes])
        // The copy's txnid one below the older's: LMDB opens at the older (the higher), the two still pair
        // (`read`), and the next commit (the older's txnid + 1) writes this slot again, as its parity says.
        let copyTxnid = min(t0, t1) > 0 ? min(t0, t1) - 1 : 0
        withUnsafeBytes(of: copyTxnid.littleEndian) { meta.replaceSubrange((144 - 16)..<(152 - 16), with: $0) }
        var written = 0
        while written < meta.count {
            let n = meta.withUnsafeBytes {
                pwrite(fd, $0.baseAddress! + written, $0.count - written, off_t(newerOffset + 16 + written))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw LMDBError(code: .system(errno), message: String(cString: strerror(errno)), context: "pwrite \(path)")
            }
            written += n
        }
        try syncData(fd, path: path)
        return min(t0, t1)
    }

    /// `path` opened with `flags` (close-on-exec); `nil` when there is no such file.
    private static func openDataFile(_ path: String, _ flags: Int32) throws -> Int32? {
        let fd = open(path, flags | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw LMDBError(code: .system(errno), message: String(cString: strerror(errno)), context: "open \(path)")
        }
        return fd
    }

    /// The first `headerBytes` of meta pages 0 and 1, and the page size; `nil` for an empty or foreign file.
    private static func rawMetaPages(_ fd: Int32, path: String) throws -> ([UInt8], [UInt8], Int)? {
        var first = [UInt8](repeating: 0, count: headerBytes)
        guard try readFully(fd, &first, at: 0, path: path) == headerBytes, field(first, 16, UInt32.self) == magic
        else { return nil }
        let pageSize = Int(field(first, 40, UInt32.self))
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return nil }
        var second = [UInt8](repeating: 0, count: headerBytes)
        guard try readFully(fd, &second, at: pageSize, path: path) == headerBytes,
            field(second, 16, UInt32.self) == magic
        else { return nil }
        return (first, second, pageSize)
    }

    private static func corrupted(_ path: String, _ what: String) -> LMDBError {
        LMDBError(code: .corrupted, message: what, context: "read header \(path)")
    }

    private static func field<T: FixedWidthInteger>(_ bytes: [UInt8], _ offset: Int, _: T.Type) -> T {
        bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }

    private static func fileSize(_ fd: Int32) -> Int { fileLength(fd).map { Int($0) } ?? 0 }

    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file.
    private static func readFully(_ fd: Int32, _ buffer: inout [UInt8], at offset: Int, path: String) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(offset + done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw LMDBError(code: .system(errno), message: String(cString: strerror(errno)), context: "pread \(path)")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }
}

/// `fdatasync(fd)`, retried when interrupted; a failure is an error naming `path`.
func syncData(_ fd: Int32, path: String) throws {
    while fdatasync(fd) != 0 {
        guard errno == EINTR else {
            throw LMDBError(code: .system(errno), message: String(cString: strerror(errno)), context: "fdatasync \(path)")
        }
    }
}

/// The length of an open file, or `nil` when `fstat` fails.
func fileLength(_ fd: Int32) -> off_t? {
    var st = stat()
    return fstat(fd, &st) == 0 ? st.st_size : nil
}
