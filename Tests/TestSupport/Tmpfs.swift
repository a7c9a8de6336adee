#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A tmpfs mounted on a temporary directory for the life of the value.
public final class Tmpfs {
    let directory = TemporaryDirectory("diskfull")
    public var path: String { directory.child("mnt") }
    private var mounted = false

    public init?(size: String) {
        mkdir(directory.child("mnt"), 0o755)
        guard
            let run = try? ChildProcess.run(
                "/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", directory.child("mnt")], timeout: 10),
            run.status == .exited(0)
        else { return nil }
        mounted = true
    }

    public func resize(_ size: String) throws {
        let run = try ChildProcess.run("/bin/mount", ["-o", "remount,size=\(size)", path], timeout: 10)
        guard run.status == .exited(0) else { throw ChildProcessError("remount \(path) to \(size): \(run.status)") }
    }

    /// The names in `path` (`nil`: not a directory).
    public static func entries(_ path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    deinit {
        if mounted { _ = try? ChildProcess.run("/bin/umount", ["-l", path], timeout: 10) }
    }
}

/// Whether this process may mount a tmpfs (root), tried once: tests that fill a disk are skipped elsewhere.
public let canMountTmpfs: Bool = Tmpfs(size: "1m") != nil
