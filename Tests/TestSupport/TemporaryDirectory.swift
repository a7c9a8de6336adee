#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A fresh directory under /tmp, removed (with its files) when `remove()` is called or the value dies.
public final class TemporaryDirectory: @unchecked Sendable {
    /// Its path.
    public let path: String

    public init(_ prefix: String = "teamlog-test") {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(cString: made!)
    }

    /// A path inside the directory.
    public func child(_ name: String) -> String { path + "/" + name }

    deinit { Self.removeTree(path) }

    /// Removes a directory tree.
    public static func removeTree(_ path: String) {
        guard let dir = opendir(path) else {
            unlink(path)
            return
        }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name == "." || name == ".." { continue }
            let child = path + "/" + name
            var st = stat()
            if lstat(child, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
                removeTree(child)
            } else {
                unlink(child)
            }
        }
        closedir(dir)
        rmdir(path)
    }
}

/// A file's text, as UTF-8 (invalid bytes repaired); "" when it cannot be opened.
public func readTextFile(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n <= 0 { break }
        out += chunk[0..<n]
    }
    return String(decoding: out, as: UTF8.self)
}
