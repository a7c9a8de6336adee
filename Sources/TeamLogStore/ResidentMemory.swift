#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// This process's resident memory, as the kernel counts it.
public enum ResidentMemory {
    /// Resident file-backed (and shared) bytes: the third field of `/proc/self/statm`, in pages. `nil`
    /// where there is no such file (not Linux) or it cannot be read.
    public static func fileBackedBytes() -> Int? { statmPages { statmField(2, $0) }.map { $0 * pageSize } }

    /// Anonymous resident bytes (the heap, stacks): `/proc/self/statm`'s resident pages (its second field)
    /// less its shared ones. `nil` where it cannot be read.
    public static func anonymousBytes() -> Int? {
        statmPages { text in
            guard let resident = statmField(1, text), let shared = statmField(2, text) else { return nil }
            return max(0, resident - shared)
        }.map { $0 * pageSize }
    }

    private static var pageSize: Int { Int(sysconf(Int32(_SC_PAGESIZE))) }

    /// What `parse` finds in `/proc/self/statm`'s line: one read into a stack buffer, no allocation (the
    /// writer's thread checks the file-backed bytes every 1,024 page reads). `nil` off Linux.
    private static func statmPages(_ parse: (UnsafeRawBufferPointer) -> Int?) -> Int? {
        #if os(Linux)
            let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            return withUnsafeMutableBytes(of: &buffer) { raw -> Int? in
                let n = read(fd, raw.baseAddress!, raw.count)
                guard n > 0 else { return nil }
                return parse(UnsafeRawBufferPointer(rebasing: raw[..<n]))
            }
        #else
            return nil
        #endif
    }

    /// The memory this process may use, as the kernel limits it: the smallest of the machine's memory
    /// (`MemTotal`) and the limits of the memory cgroups it runs in, along each one's path up to the root
    /// (v2 `memory.max`, v1 `memory.limit_in_bytes`: a container's limit). `nil` where none can be read.
    /// `root`: a directory standing for `/` (tests give one with their own `proc` and `sys` files).
    public static func limitBytes(root: String = "") -> Int? {
        #if os(Linux)
            var limits: [Int] = []
            if let meminfo = smallFile(root + "/proc/meminfo"),
                let line = meminfo.split(separator: "\n").first(where: { $0.hasPrefix("MemTotal:") }),
                let kib = Int(line.filter(\.isNumber))
            {
                limits.append(kib * 1024)
            }
            for line in (smallFile(root + "/proc/self/cgroup") ?? "").split(separator: "\n") {
                // "hierarchy:controllers:path": v2 is "0::path", v1's memory hierarchy lists "memory".
                let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
                guard fields.count == 3 else { continue }
                let file: String
                if fields[0] == "0" && fields[1].isEmpty {
                    file = "memory.max"
                } else if fields[1].split(separator: ",").contains("memory") {
                    file = "memory.limit_in_bytes"
                } else {
                    continue
                }
                let base = root + (file == "memory.max" ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory")
                var path = String(fields[2])
                while true {
                    let dir = path == "/" ? base : base + path
                    if let text = smallFile(dir + "/" + file), let bytes = Int(text.filter(\.isNumber)) {
                        limits.append(bytes)  // not "max" (v2's no limit)
                    }
                    guard let slash = path.lastIndex(of: "/"), path != "/" else { break }
                    path = slash == path.startIndex ? "/" : String(path[..<slash])
                }
            }
            return limits.min()
        #else
            return nil
        #endif
    }

    /// The text of a small file (under 64 KiB: `/proc` and cgroup files), or `nil`.
    static func smallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether the file-backed resident bytes are over `budget`, or cannot be read (then a caller that
    /// releases pages over a budget releases them, as it did before there was a budget).
    static func fileBacked(over budget: Int) -> Bool {
        guard let bytes = fileBackedBytes() else { return true }
        return bytes > budget
    }

    /// The third space-separated number of a `statm` line (its shared pages).
    public static func sharedPages(_ text: UnsafeRawBufferPointer) -> Int? { statmField(2, text) }

    /// The `index`th (from 0) space-separated number of a `statm` line; `nil` when the line has fewer or
    /// holds anything but digits before it.
    static func statmField(_ index: Int, _ text: UnsafeRawBufferPointer) -> Int? {
        var field = 0
        var value = 0
        var digits = 0
        for byte in text {
            if byte == 0x20 || byte == 0x0A {
                if field == index { return digits > 0 ? value : nil }
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
        return field == index && digits > 0 ? value : nil
    }
}

/// The process's allocator, when it is jemalloc (the executables link it; tests and libraries keep the
/// system malloc, where these do nothing): jemalloc keeps freed pages resident for its decay time (10 s by
/// default) before it returns them to the kernel. A long replay frees its working set wholesale, hundreds
/// of megabytes at once; kept for 10 s they were ~280 of an audit's ~550 MB of anonymous memory at 1M
/// events (`malloc_stats_print` at an eviction: 237 MB allocated, 569 MB resident). Reached through
/// `dlsym`, so nothing links against jemalloc but the executables.
public enum Allocator {
    /// jemalloc's controls in this process, or `nil` under another allocator.
    static let jemalloc: JemallocControls? = {
        #if os(Linux)
            JemallocControls(handle: nil)  // RTLD_DEFAULT: the process's own `mallctl`
        #else
            nil
        #endif
    }()

    /// Returns every arena's freed pages to the kernel now. Call after freeing much at once.
    public static func releaseFreedPages() { jemalloc?.purge() }

    /// Sets how long freed pages stay resident before they go back to the kernel (`dirty_decay_ms`), in
    /// existing arenas and in those made later; "muzzy" pages are returned at once. For batch commands
    /// (audit, repair) that free much and wait on nobody; servers keep jemalloc's default.
    public static func setFreedPagesDecay(milliseconds: Int) { jemalloc?.setDecay(milliseconds: milliseconds) }
}

/// jemalloc's `mallctl` interface, found in a loaded library (`handle`; `nil`: the process's own symbols).
struct JemallocControls {
    private typealias Mallctl = @convention(c) (
        UnsafePointer<CChar>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?, UnsafeMutableRawPointer?, Int
    ) -> Int32

    private let mallctl: Mallctl

    /// `MALLCTL_ARENAS_ALL`: an arena index that stands for every arena (for `purge`, not for settings).
    private static let allArenas = 4096

    init?(handle: UnsafeMutableRawPointer?) {
        guard let symbol = dlsym(handle, "mallctl") else { return nil }
        mallctl = unsafeBitCast(symbol, to: Mallctl.self)
    }

    func purge() {
        _ = mallctl("arena.\(Self.allArenas).purge", nil, nil, nil, 0)
    }

    /// Sets `dirty_decay_ms` to `milliseconds` and `muzzy_decay_ms` to 0, for arenas made later
    /// (`arenas.*`) and for each existing one by its index.
    func setDecay(milliseconds: Int) {
        var arenas: UInt32 = 0
        var length = MemoryLayout<UInt32>.size
        _ = mallctl("arenas.narenas", &arenas, &length, nil, 0)
        for (setting, milliseconds) in [("dirty_decay_ms", milliseconds), ("muzzy_decay_ms", 0)] {
            var value = milliseconds
            _ = mallctl("arenas.\(setting)", nil, nil, &value, MemoryLayout<Int>.size)
            for arena in 0..<arenas {
                _ = mallctl("arena.\(arena).\(setting)", nil, nil, &value, MemoryLayout<Int>.size)
            }
        }
    }
}
