import LMDB
public import TeamLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What `Store.compact(path:progress:)` did.
public struct CompactReport: Sendable {
    /// The store's directory.
    public var path: String
    /// The store's two data files before and after (the log's and the projections').
    public var bytesBefore: Int
    public var bytesAfter: Int
    /// The compacted store's log head and projections' checkpoint (as the store had them).
    public var headSeq: UInt64
    public var checkpointSeq: UInt64

    /// The report as JSON.
    public var json: JSONValue {
        .object([
            ("path", .string(path)), ("bytesBefore", .int(Int64(bytesBefore))),
            ("bytesAfter", .int(Int64(bytesAfter))), ("headSeq", .int(Int64(headSeq))),
            ("checkpointSeq", .int(Int64(checkpointSeq))),
        ])
    }
}

extension Store {
    /// The directory beside the store at `path` that `compact` builds the copy in (and, after the swap,
    /// holds the old store until it is removed).
    public static func compactionDirectory(for path: String) -> String {
        var base = path
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        return base + ".compacting"
    }

    /// Gives a store's free pages back to the file system: makes a compacted copy of it beside it (as
    /// `backup` does: live pages only, synced) and swaps the two directories in one step, then removes the
    /// old one. LMDB files never shrink by themselves; after a burst the projections' file may hold
    /// hundreds of MB of free pages (`StoreStatus.projectionFreeBytes`).
    ///
    /// Takes the writer lock for the whole time, so no writer runs meanwhile (refused with `writerBusy`
    /// when one does; a writer that waits for the lock gets it on the compacted store). Queries from other
    /// processes may run throughout: one that opened the store before the swap reads the old files to its
    /// end. Whenever the process dies, `path` holds a whole store — the old one before the swap, the copy
    /// after — and `compactionDirectory(for:)` what is left of the other, removed by the next `compact`.
    ///
    /// A `path` through a symbolic link is resolved first: the copy is made beside the real directory (on
    /// its file system), and the link keeps pointing at the store.
    public static func compact(path given: String, progress: ((Int) -> Void)? = nil) throws -> CompactReport {
        try refuseVerifiedCopy(given, "a compaction")
        let source = try Store.reader(at: given)
        var sourceOpen = true
        defer { if sourceOpen { source.close() } }
        let path = canonicalPath(given)  // it exists: the reader above opened it
        let lock: WriterLock
        do { lock = try WriterLock(directory: path, wait: false) } catch let error as StoreError
        where error.code == .writerBusy {
            // Not the writers' "or pass --wait": compaction does not wait.
            let holder = WriterLock.holder(directory: path).map { " (pid \($0))" } ?? ""
            throw StoreError(
                code: .writerBusy,
                message: "store \(given) is being written by another process\(holder): stop the writer first, "
                    + "compaction needs the store to itself", path: given)
        }
        defer { lock.release() }
        let bytesBefore = fileSize(path + "/data.mdb") + fileSize(path + "/" + ProjectionDatabases.directory + "/data.mdb")
        let copyPath = compactionDirectory(for: path)
        var leftover = stat()
        if lstat(copyPath, &leftover) == 0 {
            // A killed compaction's copy, or the store it had replaced: a directory. Anything else there is
            // not compact's to remove (a link would have its target's files removed).
            guard (leftover.st_mode & S_IFMT) == S_IFDIR else {
                throw StoreError(
                    code: .other, message: "\(copyPath) exists and is not a directory a compaction left: remove it first",
                    path: copyPath)
            }
            removeDirectoryTree(copyPath)
        }
        // Whatever a signal stops the process at, `copyPath` then holds garbage: the copy before the swap (the
        // exchange is one step), the old store after it.
        let registered = Leftovers.register(copyPath)
        defer { Leftovers.unregister(registered) }
        let owner = ownerToAdopt(path)  // before the directory is replaced by root's copy
        let report = try source.backup(to: copyPath, progress: progress)
        source.close()
        sourceOpen = false
        // The copy is locked before it takes the store's name, so no writer gets in between.
        let copyLock: WriterLock
        do { copyLock = try WriterLock(directory: copyPath, wait: false) } catch {
            removeDirectoryTree(copyPath)
            throw error
        }
        defer { copyLock.release() }
        do { try carryCutRecords(from: path, to: copyPath) } catch {
            removeDirectoryTree(copyPath)
            throw error
        }
        if let owner { adopt(copyPath, owner: owner) }  // its files and lock, before it takes the store's name
        do {
            try Environment.exchangeDirectories(copyPath, path, parent: parentDirectory(of: path))
        } catch {
            removeDirectoryTree(copyPath)
            throw StoreError(
                code: .io, message: "cannot swap \(path) with its compacted copy: \(error)", cause: error, path: path)
        }
        removeDirectoryTree(copyPath)  // now the old store
        return CompactReport(
            path: given, bytesBefore: bytesBefore, bytesAfter: report.logBytes + report.projectionBytes,
            headSeq: report.headSeq, checkpointSeq: report.checkpointSeq)
    }

    /// The files `repair` saved the records it cut to (`cut-*.jsonl`, `saveCutRecords`), linked into the
    /// compacted copy before it replaces the store (same file system: no bytes copied) and the copy's
    /// entries synced: a compaction keeps them as it keeps the log. Anything else in the directory a
    /// person put there is not the store's and goes with the old one, as before.
    static func carryCutRecords(from path: String, to copyPath: String) throws {
        let names = (directoryEntries(path) ?? []).filter { $0.hasPrefix("cut-") && $0.hasSuffix(".jsonl") }
        guard !names.isEmpty else { return }
        for name in names where link(path + "/" + name, copyPath + "/" + name) != 0 {
            throw StoreError.system(
                "compaction stopped, the store untouched: cannot keep \(path)/\(name), the records a repair cut, in the "
                    + "compacted copy", call: "link", path: path + "/" + name)
        }
        try Environment.syncDirectory(copyPath)
    }
}
