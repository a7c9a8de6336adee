import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a run stopped by a signal must not leave behind: the directories (or, in a directory it was
/// given, the files) this process is making and would remove when done — a replay's scratch store (`ScratchStore`), a backup being copied, a verified
/// copy being written, a compaction's copy (or the old store it swapped out). The code that makes one registers it and unregisters it when the directory is
/// removed or kept; `removeAll()` is for the process's signal handling (the CLI's), which calls it from
/// an ordinary thread before letting the signal end the process.
///
/// A scratch store of a 5M-event audit is about 2 GB under `$TMPDIR`: a Ctrl-C of such an audit left it
/// there for good before. What `kill -9` leaves is swept by the next replay (`ScratchStore.removeAbandoned`).
public enum Leftovers {
    private static let monitor = Monitor()
    nonisolated(unsafe) private static var registered: [Int: String] = [:]
    nonisolated(unsafe) private static var next = 0

    /// `path` is to be removed if the process is stopped by a signal; returns the token `unregister` takes.
    static func register(_ path: String) -> Int {
        monitor.locked {
            next += 1
            registered[next] = path
            return next
        }
    }

    /// `token`'s path is no longer this process's to remove (done with, or kept).
    static func unregister(_ token: Int) {
        monitor.locked { _ = registered.removeValue(forKey: token) }
    }

    /// The paths registered now, in the order they were first registered (one registered twice — a
    /// compaction's copy, also a backup's while it is copied — once).
    public static var paths: [String] {
        monitor.locked {
            var seen = Set<String>()
            return registered.sorted { $0.key < $1.key }.map(\.value).filter { seen.insert($0).inserted }
        }
    }

    /// Removes every registered directory with what is in it (or file), and returns the paths that were
    /// there; for a process about to end. Files are unlinked whole, never truncated first (`removeDirectoryTree` shrinks large files
    /// step by step): this process's other threads may still be reading or writing them through LMDB's
    /// maps, where a truncated file is a SIGBUS; an unlinked one stays whole until the process ends.
    @discardableResult
    public static func removeAll() -> [String] {
        let paths = monitor.locked {
            var seen = Set<String>()
            let paths = registered.sorted { $0.key < $1.key }.map(\.value).filter { seen.insert($0).inserted }
            registered.removeAll()
            return paths
        }
        var removed: [String] = []
        for path in paths {
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }  // not made yet (or already gone)
            removeWhileInUse(path)
            removed.append(path)
        }
        return removed
    }

    /// Removes `path` while other threads may still be making files in it (a scratch store being opened
    /// when the signal came): renamed first, so what they make by its name fails from then on, then its
    /// files unlinked until the directory can be removed (a file made between a listing and the `rmdir`
    /// is found by the next round).
    private static func removeWhileInUse(_ path: String) {
        var st = stat()
        if lstat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFDIR {
            unlink(path)  // a file (what a run made in a directory it did not make)
            return
        }
        let aside = path + ".removing"
        let target = rename(path, aside) == 0 ? aside : path
        for _ in 0..<1_000 {
            unlinkTree(target)
            if rmdir(target) == 0 || errno == ENOENT { return }
            usleep(1_000)
        }
    }

    private static func unlinkTree(_ path: String) {
        for name in directoryEntries(path) ?? [] where unlink(path + "/" + name) != 0 {
            unlinkTree(path + "/" + name)
            rmdir(path + "/" + name)
        }
    }
}
