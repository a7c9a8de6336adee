import LMDB
public import TeamLog
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What `Store.backup(to:progress:)` made.
public struct BackupReport: Sendable {
    /// The new store's directory.
    public var path: String
    /// The copied log's last seq.
    public var headSeq: UInt64
    /// The copied projections' checkpoint (at or before `headSeq`).
    public var checkpointSeq: UInt64
    /// Events a writer opening the copy replays after its checkpoint (`headSeq - checkpointSeq`).
    public var lag: UInt64 { headSeq > checkpointSeq ? headSeq - checkpointSeq : 0 }
    /// The sizes of the copy's two data files (compacted: live pages only).
    public var logBytes: Int
    public var projectionBytes: Int

    /// The report as JSON.
    public var json: JSONValue {
        .object([
            ("path", .string(path)), ("headSeq", .int(Int64(headSeq))),
            ("checkpointSeq", .int(Int64(checkpointSeq))), ("lag", .int(Int64(lag))),
            ("logBytes", .int(Int64(logBytes))), ("projectionBytes", .int(Int64(projectionBytes))),
        ])
    }
}

/// Hot backups: a consistent copy of a store that a writer may be writing, in a new directory.
extension Store {
    /// Copies this store to the new directory `path` (created; an existing one must be empty), beside a
    /// writer that goes on working — from the writer's own `Store` or from a reader in another process.
    ///
    /// The projection environment is copied first and the log second, each from one read snapshot and
    /// compacted (`Environment.copy(to:)`: written out a few MiB at a time, so a live writer's commits on
    /// the same disk never wait behind the whole copy, then synced and renamed into place). A checkpoint is
    /// written only after the log holds its seq, so the copied projections are at or before the copied
    /// log's head, and the copy is a store as a crash at that moment would have left it: a writer opening
    /// it replays the log after the checkpoint (`BackupReport.lag` events, about one checkpoint interval),
    /// readers answer as of the checkpoint at once, and `teamlog audit` checks it like any store. The copy
    /// is then opened as a reader to report its positions (which checks it opens).
    ///
    /// `progress`, when given, is called on this thread about every 100 ms with the bytes written so far.
    /// On failure the directory is removed when this call created it, emptied otherwise.
    public func backup(to path: String, progress: ((Int) -> Void)? = nil) throws -> BackupReport {
        try Self.refuseVerifiedCopy(env.path, "a backup")
        // (A projections-only scratch store — a verified copy in the making — has no log by design.)
        if !projectionsOnly, let problem = try projectionsPastLog() { throw problem }
        try Self.refuseInside(path, of: env.path, "backup destination")
        let created = mkdir(path, 0o755) == 0
        if !created {
            let error = errno
            guard error == EEXIST, directoryEntries(path)?.isEmpty == true else {
                throw StoreError(
                    code: .other,
                    message: error == EEXIST
                        ? "backup destination \(path) exists and is not an empty directory; name a new one"
                        : "cannot create backup directory \(path)",
                    cause: error == EEXIST ? nil : SystemCallError("mkdir", error), path: path)
            }
        }
        // A signal that stops the process mid-copy (the CLI's Ctrl-C) removes what this call created: the
        // directory, or what it makes in the empty one it was given.
        let made = created ? [path] : [path + "/" + ProjectionDatabases.directory] + ["data.mdb", "lock.mdb"].map { path + "/" + $0 } + [Environment.copyInProgress(in: path)]
        let leftovers = made.map { Leftovers.register($0) }
        defer { leftovers.forEach(Leftovers.unregister) }
        let projPath = path + "/" + ProjectionDatabases.directory
        do {
            guard mkdir(projPath, 0o755) == 0 else {
                throw StoreError.system("cannot create \(projPath)", call: "mkdir", path: projPath)
            }
            try copyEnvironments(to: path, projPath: projPath, progress: progress)
            let copy = try Store.reader(at: path)
            defer { copy.close() }
            let status = try copy.status()
            if status.projectionsPastLog && !projectionsOnly {
                // The log was cut between the two copies (a `repair` ran meanwhile: it takes the writer's
                // lock, which a hot backup does not wait for).
                throw StoreError(
                    code: .other,
                    message: "backup to \(path) failed: the store's log was cut while it was copied (its copied "
                        + "projections are at seq \(status.checkpointSeq), its copied log ends at \(status.headSeq): "
                        + "a `teamlog repair` ran meanwhile); nothing was kept — run the backup again",
                    path: path)
            }
            return BackupReport(
                path: path, headSeq: status.headSeq, checkpointSeq: status.checkpointSeq,
                logBytes: Self.fileSize(path + "/data.mdb"), projectionBytes: Self.fileSize(projPath + "/data.mdb"))
        } catch {
            if created {
                removeDirectoryTree(path)
            } else {
                removeDirectoryTree(projPath)
                for name in ["data.mdb", "lock.mdb"] { unlink(path + "/" + name) }
                unlink(Environment.copyInProgress(in: path))
            }
            throw error
        }
    }

    /// The two copies, projections first; on another thread when `progress` watches their sizes here.
    private func copyEnvironments(to path: String, projPath: String, progress: ((Int) -> Void)?) throws {
        func copyBoth() throws {
            do {
                try projectionEnv.copy(to: projPath)
                try env.copy(to: path)
            } catch let error as LMDBError {
                throw StoreError(code: .lmdb, message: "backup to \(path) failed: \(error)", cause: error, path: path)
            }
        }
        guard let progress else { return try copyBoth() }
        let monitor = Monitor()
        var done = false
        // Each copy is written under another name and renamed when whole (`Environment.copy(to:)`).
        let files = [projPath, path].flatMap { [$0 + "/data.mdb", Environment.copyInProgress(in: $0)] }
        _ = try inParallel(
            {
                while true {
                    let finished = monitor.locked { monitor.wait(until: { done }, timeoutMs: 100) }
                    progress(files.reduce(0) { $0 + Self.fileSize($1) })
                    if finished { return }
                }
            },
            {
                defer {
                    monitor.locked {
                        done = true
                        monitor.broadcast()
                    }
                }
                try copyBoth()
            })
    }

    /// A file's size in bytes; 0 when it does not exist (yet).
    static func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }
}

extension Store {
    /// Refuses a directory inside the store at `storePath` (symbolic links and `..` resolved): there a copy
    /// would be removed without a word by the next `repair` (which swaps `proj/`) or `compact` (which swaps
    /// the whole directory) — and copied into the next backup. `what` names the option in the message.
    public static func refuseInside(_ path: String, of storePath: String, _ what: String) throws {
        let store = canonicalPath(storePath)
        let destination = canonicalPath(path)
        if destination == store || destination.hasPrefix(store.hasSuffix("/") ? store : store + "/") {
            throw StoreError(
                code: .other,
                message: "\(what) \(path) is inside the store \(storePath): `repair` and `compact` would "
                    + "remove it; name a directory outside the store",
                path: path)
        }
    }

    /// `path` made absolute with every symbolic link resolved (`realpath`), for a path whose last component
    /// need not exist yet (a backup's new directory): its parent is resolved and the name appended.
    static func canonicalPath(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        var absolute = path
        if !absolute.hasPrefix("/"), let cwd = getcwd(nil, 0) {
            absolute = String(cString: cwd) + "/" + path
            free(cwd)
        }
        while absolute.count > 1 && absolute.hasSuffix("/") { absolute.removeLast() }
        guard let slash = absolute.lastIndex(of: "/") else { return absolute }
        let name = String(absolute[absolute.index(after: slash)...])
        let parent = slash == absolute.startIndex ? "/" : String(absolute[..<slash])
        guard name != "." && name != ".." else { return absolute }
        let resolvedParent = canonicalPath(parent)
        return resolvedParent.hasSuffix("/") ? resolvedParent + name : resolvedParent + "/" + name
    }
}
