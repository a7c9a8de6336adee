import LMDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The projection environment's last transaction known to be on disk, and the boot of the machine that
/// wrote that down: `proj/flushed`, 60 bytes rewritten after every checkpoint.
///
/// A checkpoint commits without sync and then flushes its pages range by range (`CheckpointJob`), so that
/// the log's group commits on the same device never queue behind a second's worth of B-tree pages at once.
/// Until its flush is done, a power loss may leave the new meta page on disk without some of the pages it
/// names. The rule at open, before LMDB maps the file: when the environment's newest transaction is the
/// one after the one recorded here and the machine has rebooted since (a process crash keeps every written
/// page in the page cache), the newest meta is rolled back to the one before it
/// (`DataFileHeader.rollBackUnflushedMeta`): LMDB never writes a transaction's pages over those of the
/// transaction before, so that one is whole — an older checkpoint, and the log's tail after it is
/// replayed as after any crash. A reader in another process refuses such an environment until a writer
/// has opened the store.
///
/// Layout, native byte order: magic `TLFM` (u32), version 1 (u32), txnid (u64), the boot id's 36 ASCII
/// bytes, an FNV-1a hash of the 52 bytes before it (u64); a torn or foreign file reads as none.
struct FlushMarker: Equatable {
    /// The projection environment's transaction that is on disk.
    var txnid: UInt64
    /// `/proc/sys/kernel/random/boot_id` when it was written.
    var bootID: [UInt8]

    static let fileName = "flushed"
    private static let magic: UInt32 = 0x4D46_4C54  // "TLFM"
    private static let version: UInt32 = 1
    static let byteCount = 60

    /// The marker of the projection directory `directory`, or `nil` (none yet, torn, or foreign).
    static func read(directory: String) -> FlushMarker? {
        let fd = open(directory + "/" + fileName, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: byteCount)
        guard bytes.withUnsafeMutableBytes({ pread(fd, $0.baseAddress, $0.count, 0) }) == byteCount else { return nil }
        func field<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        }
        guard field(0, UInt32.self) == magic, field(4, UInt32.self) == version,
            field(52, UInt64.self) == hash(bytes[..<52])
        else { return nil }
        return FlushMarker(txnid: field(8, UInt64.self), bootID: Array(bytes[16..<52]))
    }

    /// Writes the marker and syncs it (one sector: written whole or detected as torn).
    func write(directory: String) throws {
        let path = directory + "/" + Self.fileName
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError.system("cannot open \(path)", call: "open", path: path) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        withUnsafeBytes(of: Self.magic.littleEndian) { bytes += $0 }
        withUnsafeBytes(of: Self.version.littleEndian) { bytes += $0 }
        withUnsafeBytes(of: txnid.littleEndian) { bytes += $0 }
        bytes += bootID.prefix(36) + [UInt8](repeating: 0, count: max(0, 36 - bootID.count))
        withUnsafeBytes(of: Self.hash(bytes[...]).littleEndian) { bytes += $0 }
        guard bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == Self.byteCount else {
            throw StoreError.system("cannot write \(path)", call: "pwrite", path: path)
        }
        while fdatasync(fd) != 0 {
            guard errno == EINTR else { throw StoreError.system("cannot sync \(path)", call: "fdatasync", path: path) }
        }
    }

    /// Makes every committed page of `env` durable (`Environment.flushDataFile`) and records its last
    /// transaction as flushed; nothing for a `noSync` environment, which promises nothing on disk.
    static func flush(_ env: Environment) throws {
        guard !env.options.noSync else { return }
        try env.flushDataFile()
        try FlushMarker(txnid: UInt64(env.lastTransactionID)).write(directory: env.path)
    }

    /// `flush` when the marker is behind `env`'s last transaction — after a flush that failed, or synced
    /// commits of other paths (a rebuild at open, a repair) — so that the commit about to be made without
    /// sync is the only one that can be unflushed (what the roll back at open relies on).
    static func catchUp(_ env: Environment) throws {
        guard !env.options.noSync, read(directory: env.path)?.txnid != UInt64(env.lastTransactionID) else { return }
        try flush(env)
    }

    /// This boot's id (36 bytes; empty where the system has none, which makes every open the same boot).
    static let currentBootID: [UInt8] = {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 36)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return n == 36 ? bytes : []
    }()

    /// Whether the projection environment in `directory` has a newest transaction that was committed
    /// without sync before a reboot and may not have reached the disk whole (see the type's doc).
    static func newestMayBeTorn(directory: String, bootID: [UInt8] = currentBootID) throws -> Bool {
        guard let marker = read(directory: directory), marker.bootID != padded(bootID),
            let (t0, t1) = try DataFileHeader.metaTransactionIDs(directory: directory)
        else { return false }
        // Only the transaction right after the recorded one is ever committed unflushed (`CheckpointJob`
        // flushes and records before it commits); later ones were synced commits, which made it durable too.
        return max(t0, t1) == marker.txnid + 1
    }

    private static func padded(_ id: [UInt8]) -> [UInt8] {
        Array(id.prefix(36)) + [UInt8](repeating: 0, count: max(0, 36 - id.count))
    }

    init(txnid: UInt64, bootID: [UInt8] = FlushMarker.currentBootID) {
        self.txnid = txnid
        self.bootID = Self.padded(bootID)
    }

    private static func hash(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes {
            h ^= UInt64(b)
            h &*= 0x0000_0100_0000_01B3
        }
        return h
    }
}
