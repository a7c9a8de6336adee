import LMDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Naming what went wrong in words a user can act on: a damaged or foreign file at open, a full disk at
/// commit.
extension Store {
    /// Below this many free bytes on the store's file system a failed write is put down to a full disk:
    /// LMDB reports a short write as EIO, and one that ran out of room leaves less than its last chunk
    /// (64 pages) free.
    static let nearlyFullBytes: UInt64 = 1 << 20

    /// The failure of the batch `seqs`: `.noSpace` when the file system is full, else `.commitFailed`.
    func commitFailure(_ error: any Error, seqs: ClosedRange<UInt64>) -> StoreError {
        Self.writeFailure(
            error, directory: env.path, place: "store \(env.path)",
            what: "commit of seq \(seqs.lowerBound)...\(seqs.upperBound) failed",
            kept: "nothing of that batch was stored or printed, and the store keeps every batch before it",
            retry: "run the same input again: what was stored answers `duplicate`")
    }

    /// A failed write named: `.noSpace` when `directory`'s file system is full (`outOfSpace`), else
    /// `.commitFailed`; with what it left as it was (`kept`) and how to go on (`retry`).
    static func writeFailure(
        _ error: any Error, directory: String, place: String, what: String, kept: String, retry: String?
    ) -> StoreError {
        if let free = outOfSpace(error, directory: directory) {
            return StoreError(
                code: .noSpace,
                message: "\(what): no space left on device for \(place) (\(free) bytes free); \(kept). Free some space"
                    + (retry.map { ", then \($0)" } ?? ""), cause: error, path: directory)
        }
        return StoreError(
            code: .commitFailed,
            message: "\(what) on \(place); \(kept)" + (retry.map { ". Once the cause is fixed, \($0)" } ?? ""),
            cause: error, path: directory)
    }

    /// The free bytes of `directory`'s file system when `error` comes from it being full: ENOSPC or EDQUOT,
    /// or another write error (LMDB turns a short write into EIO) on a file system with almost nothing free.
    static func outOfSpace(_ error: any Error, directory: String) -> UInt64? {
        guard let errno = (error as? LMDBError)?.code.systemErrno else { return nil }
        guard let free = StoreError.freeBytes(directory) else { return errno == ENOSPC || errno == EDQUOT ? 0 : nil }
        if errno == ENOSPC || errno == EDQUOT || free < nearlyFullBytes { return free }
        return nil
    }
}

extension StoreError {
    /// The store's LMDB environment could not be opened: a damaged, short or foreign file is named as such
    /// (LMDB's header is checked before the file is mapped, and nothing is written to it).
    static func opening(_ path: String, _ error: LMDBError) -> StoreError {
        let untouched = "it was not opened and nothing was written to it"
        // The projections are a cache of the log: a repair rebuilds them. The log is the store.
        let advice =
            path.hasSuffix("/" + ProjectionDatabases.directory)
            ? "The log is the truth and the projections a cache of it: `teamlog repair` sets these files aside and "
                + "rebuilds the projections from the log"
            : "Restore the store from a copy, or rebuild it from the input"
        switch error.code {
        case .truncated:
            return StoreError(
                code: .truncated,
                message: "store file \(path)/data.mdb is truncated: \(error.message); \(untouched). \(advice)", cause: error,
                path: path)
        case .corrupted:
            return StoreError(
                code: .corrupted,
                message: "store file \(path)/data.mdb has a damaged LMDB header: \(error.message); \(untouched). \(advice)",
                cause: error, path: path)
        case .invalid where path.hasSuffix("/" + ProjectionDatabases.directory):
            return StoreError(
                code: .corrupted,
                message: "the projections' file \(path)/data.mdb is \(error.message); \(untouched). \(advice)",
                cause: error, path: path)
        case .invalid:
            return StoreError(
                code: .notAStore, message: "\(path) is not a teamlog store: data.mdb is \(error.message); \(untouched)",
                cause: error, path: path)
        case .versionMismatch, .incompatible:
            return StoreError(
                code: .incompatibleFormat, message: "store \(path) was written by an incompatible LMDB (\(error.message))",
                cause: error, path: path)
        case .system(ENOSPC), .system(EDQUOT):
            let free = StoreError.freeBytes(path).map { " (\($0) bytes free)" } ?? ""
            return StoreError(
                code: .noSpace,
                message: "no space left on device for store \(path)\(free): \(error.message); nothing was written to it. "
                    + "Free some space, then run the same command again", cause: error, path: path)
        case .system(ENOENT) where isNonDirectory(path):
            return notADirectory(path)
        case .system(ENOENT):
            return StoreError(
                code: .notAStore,
                message: "no teamlog store at \(path) (no data file); `teamlog ingest --store \(path)` creates one",
                cause: error, path: path)
        default:
            return StoreError(code: .lmdb, message: "cannot open store \(path)", cause: error, path: path)
        }
    }
}

extension StoreError {
    /// A directory with a store's projections (`proj/`) or a copy's unfinished file but no log (`data.mdb`),
    /// which is no verified copy: what a `backup` stopped midway leaves (it copies the projections first,
    /// then the log, each under a temporary name renamed when whole). It is refused as it is — before, the
    /// error said `teamlog ingest --store` would create a store there, and that made an empty log under the
    /// copied projections: a store that holds events its log does not.
    static func projectionsWithoutLog(_ path: String) -> StoreError? {
        guard access(path + "/data.mdb", F_OK) != 0, !Store.isVerifiedCopy(path) else { return nil }
        let projPath = path + "/" + ProjectionDatabases.directory
        let hasProjections = access(projPath + "/data.mdb", F_OK) == 0
        let partial: [String] = [Environment.copyInProgress(in: path), Environment.copyInProgress(in: projPath)]
            .filter { (file: String) in access(file, F_OK) == 0 }
        guard hasProjections || !partial.isEmpty else { return nil }
        let holds = hasProjections ? "projections (proj/)" : "part of a copy"
        let unfinished = partial.isEmpty ? "" : " (a copy never finished: \(partial.joined(separator: ", ")))"
        return StoreError(
            code: .notAStore,
            message: "\(path) is not a whole store: it holds \(holds) but no log (data.mdb)\(unfinished) — "
                + "what a `teamlog backup` stopped midway leaves, as it copies the projections first and the log "
                + "second. Remove it and make the copy again; nothing will write a log into it",
            path: path)
    }

    /// The free bytes of `path`'s file system, if it can be asked.
    static func freeBytes(_ path: String) -> UInt64? {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return nil }
        return UInt64(fs.f_bavail) * UInt64(fs.f_frsize)
    }

    /// Whether `path` exists and is not a directory (a store is one).
    static func isNonDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFDIR
    }

    /// A store path that names a file: a store is a directory, and `ingest` cannot create one there.
    static func notADirectory(_ path: String) -> StoreError {
        StoreError(
            code: .notAStore, message: "\(path) is a file, not a teamlog store (a store is a directory); nothing was written to it",
            path: path)
    }
}
