#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// This process's resident memory, as the kernel counts it.
public enum ResidentMemory {
    /// Resident file-backed (and shared) bytes: the third field of `/proc/self/statm`, in pages. `nil`
    /// where there is no such file (not Linux) or it cannot be read.
    public static func fileBackedBytes() -> Int? {
        #if os(Linux)
            let fd = open("/proc/self/statm", O_RDONLY)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            return withUnsafeMutableBytes(of: &buffer) { raw -> Int? in
                let n = read(fd, raw.baseAddress!, raw.count)
                guard n > 0 else { return nil }
                return sharedPages(UnsafeRawBufferPointer(rebasing: raw[..<n])).map { $0 * Int(sysconf(Int32(_SC_PAGESIZE))) }
            }
        #else
            return nil
        #endif
    }

    /// Whether the file-backed resident bytes are over `budget`, or cannot be read (then a caller that
    /// releases pages over a budget releases them, as it did before there was a budget).
    static func fileBacked(over budget: Int) -> Bool {
        guard let bytes = fileBackedBytes() else { return true }
        return bytes > budget
    }

    /// The third space-separated number of a `statm` line.
    public static func sharedPages(_ text: UnsafeRawBufferPointer) -> Int? {
        var field = 0
        var value = 0
        var digits = 0
        for byte in text {
            if byte == 0x20 || byte == 0x0A {
                if field == 2 { return digits > 0 ? value : nil }
                field += 1
                value = 0
                digits = 0
            } else if byte >= 0x30 && byte <= 0x39 {
                value = value * 10 + Int(byte - 0x30)
                digits += 1
            } else {
                return nil
            }
        }
        return field == 2 && digits > 0 ? value : nil
    }
}
