#if canImport(Glibc)
    import Glibc
#endif

// What the bench reports share: files read back, the date, the machine and its load.

/// The whole text of the file at `path` ("" when it cannot be read).
func readText(_ path: String) -> String {
    guard let f = fopen(path, "r") else { return "" }
    defer { fclose(f) }
    var bytes: [UInt8] = []
    var block = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = fread(&block, 1, block.count, f)
        if n <= 0 { break }
        bytes += block[..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The date and time now, UTC, to the minute.
func utcDate() -> String {
    var t = time(nil)
    var parts = tm()
    gmtime_r(&t, &parts)
    var buffer = [CChar](repeating: 0, count: 32)
    strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M", &parts)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Cores and memory of this machine.
func machineDescription() -> String {
    let cores = sysconf(Int32(_SC_NPROCESSORS_ONLN))
    let memory = Double(sysconf(Int32(_SC_PHYS_PAGES))) * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_073_741_824
    return "\(cores) cores, \(fmt(memory)) GiB"
}

/// The 1, 5 and 15 minute load averages.
func loadAverage() -> String {
    var loads = [Double](repeating: 0, count: 3)
    guard getloadavg(&loads, 3) == 3 else { return "unknown" }
    return loads.map { fmt($0, 2) }.joined(separator: " / ")
}
