#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A store run by a service user and maintained by root (`sudo teamlog compact`, `repair`, a root
/// `ingest` of one line): every file root created in it — a new `lock.mdb`, `writer.lock`, the rebuilt
/// `proj/`, the compacted directory itself — was root's, and the service could no longer open its own
/// store ("Permission denied" on `writer.lock`). As root, what teamlog creates in a store is given to the
/// store directory's owner (found before the command changes anything: a compaction replaces the
/// directory). Nothing changes when not root, or when the store is root's.
extension Store {
    /// The owner (uid, gid) to give what root creates in the store at `path`; `nil` when this process is
    /// not root, or there is no such directory, or root owns it.
    static func ownerToAdopt(_ path: String) -> (uid: uid_t, gid: gid_t)? {
        guard geteuid() == 0 else { return nil }
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid != 0 else { return nil }
        return (st.st_uid, st.st_gid)
    }

    /// Gives `path` and everything under it (not following links) to `owner` where another owns it.
    static func adopt(_ path: String, owner: (uid: uid_t, gid: gid_t)) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if st.st_uid != owner.uid || st.st_gid != owner.gid { _ = lchown(path, owner.uid, owner.gid) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return }
        for name in directoryEntries(path) ?? [] { adopt(path + "/" + name, owner: owner) }
    }

    /// `adopt` of the store directory at `path` by its own owner, when root runs this.
    static func adoptByItsOwner(_ path: String) {
        guard let owner = ownerToAdopt(path) else { return }
        adopt(path, owner: owner)
    }
}
