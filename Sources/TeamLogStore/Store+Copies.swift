#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension Store {
    /// A copy of a store (`teamlog backup`), opened read-only, with the seq its projections are at.
    public struct Copy {
        public let store: Store
        public let path: String
        public let checkpointSeq: UInt64
    }

    /// The copy to start a replay to `seq` from (`--at SEQ --base DIR`, `serve --at-base DIR`): `path` is a
    /// copy, or a directory of copies (the backups kept, say one per day — each entry of it that is a
    /// store; the others are passed over). Returns the one whose checkpoint is the newest at or before
    /// `seq`, open (the others are closed again), or `nil` when none is; with every copy's checkpoint seq
    /// found, in `path`'s order, for the caller's message. Throws `notAStore` when `path` is neither a
    /// store nor a directory.
    ///
    /// Whether the copy can serve this store (its settings, its checkpoint hash against this log) is
    /// `replayIntoScratch(base:)`'s to check: a copy of another store is refused there, not passed over.
    ///
    /// `excluding`: the store the copy is for, which is never opened as one of its copies (an LMDB
    /// environment must not be open twice in one process — least of all a live writer's): `path` naming
    /// it throws, a directory holding it passes it over.
    ///
    /// `verifiedOnly`: only verified copies (`teamlog audit --verified`, `keepVerifiedCopy`) are taken, and
    /// a `path` that does not exist yet holds none (the first clean audit creates it).
    ///
    /// `passedOver`: told of each entry of a directory of copies that is a store too damaged to open
    /// (truncated, a damaged header, another format): passed over, as one copy's damage must not take the
    /// others out of service — the caller says so, for the copy wants replacing. A `path` that is itself
    /// a damaged copy throws.
    public static func newestCopy(
        at path: String, atOrBefore seq: UInt64, excluding store: String? = nil, verifiedOnly: Bool = false,
        passedOver: ((String, StoreError) -> Void)? = nil
    ) throws -> (copy: Copy?, seqs: [UInt64]) {
        let excluded = store.flatMap(directoryIdentity)
        if let excluded, directoryIdentity(path) == excluded {
            throw StoreError(code: .other, message: "\(path) is the store itself, not a copy of it", path: path)
        }
        if verifiedOnly && access(path, F_OK) != 0 && errno == ENOENT { return (nil, []) }
        var best: Copy?
        var seqs: [UInt64] = []
        func consider(_ copy: Copy) {
            seqs.append(copy.checkpointSeq)
            if copy.checkpointSeq <= seq, copy.checkpointSeq >= best?.checkpointSeq ?? 0 {
                best?.store.close()
                best = copy
            } else {
                copy.store.close()
            }
        }
        if !verifiedOnly || isVerifiedCopy(path), let copy = try openCopy(path) {
            consider(copy)
            return (best, seqs)
        }
        guard let names = directoryEntries(path) else {
            throw StoreError(
                code: .notAStore, message: "\(path) is neither a teamlog store nor a directory of them", path: path)
        }
        for name in names.sorted() {
            let entry = path + "/" + name
            if let excluded, directoryIdentity(entry) == excluded { continue }
            if verifiedOnly && !isVerifiedCopy(entry) { continue }
            do {
                if let copy = try openCopy(entry) { consider(copy) }
            } catch let error as StoreError where [.truncated, .corrupted, .incompatibleFormat].contains(error.code) {
                passedOver?(entry, error)
            }
        }
        return (best, seqs)
    }

    /// Whether `a` and `b` name the same directory (by device and inode: whatever links or `..` lead there).
    public static func sameDirectory(_ a: String, _ b: String) -> Bool {
        guard let identity = directoryIdentity(a) else { return false }
        return directoryIdentity(b) == identity
    }

    /// A directory's device and inode (the same directory by any path: links, `..`, bind names); `nil`
    /// when `path` is no directory.
    private static func directoryIdentity(_ path: String) -> [UInt64]? {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return [UInt64(st.st_dev), UInt64(st.st_ino)]
    }

    /// The store at `path` opened read-only with its checkpoint seq; `nil` when there is none there.
    private static func openCopy(_ path: String) throws -> Copy? {
        let store: Store
        do { store = try Store.reader(at: path) } catch let error as StoreError
            where error.code == .notAStore
        {
            return nil
        }
        do {
            return Copy(store: store, path: path, checkpointSeq: try store.readStoredProjections { $1 })
        } catch {
            store.close()
            throw error
        }
    }
}
