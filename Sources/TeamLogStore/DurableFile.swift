#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import LMDB

/// A new file written front to back and synced, with its directory entry, before it counts: what a
/// verified copy's `VERIFIED` file and the records `repair` cuts from a log are written with. Failures are
/// `StoreError`s naming the file (a full disk among them: the caller's work stops before anything else).
final class DurableFile {
    let path: String
    private var fd: Int32

    /// Creates `path` (`exclusive`: it must not exist; else any file there is truncated).
    init(creating path: String, exclusive: Bool = false) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), 0o644)
        guard fd >= 0 else { throw StoreError.system("cannot create \(path)", call: "open", path: path) }
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Appends `bytes`.
    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw StoreError.system("cannot write \(path)", call: "write", path: path) }
            offset += n
        }
    }

    /// Syncs the file and its directory's entry, and closes it.
    func finish() throws {
        while fsync(fd) != 0 {
            guard errno == EINTR else { throw StoreError.system("cannot sync \(path)", call: "fsync", path: path) }
        }
        close(fd)
        fd = -1
        try Environment.syncDirectory(parentDirectory(of: path))
    }

    /// Removes the file (a write that could not be finished).
    func discard() {
        if fd >= 0 { close(fd) }
        fd = -1
        unlink(path)
    }
}

/// The C library's `write` (inside `DurableFile` the name is its method's).
private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int { write(fd, bytes, count) }
