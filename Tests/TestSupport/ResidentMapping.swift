#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Resident kB (smaps `Rss:`) of the mapping of this process that holds `address` (an LMDB map's, for
/// tests of page releases); `nil` where there is no `/proc/self/smaps`.
public func residentKB(ofMappingHolding address: UnsafeRawPointer) -> Int? {
    guard let file = fopen("/proc/self/smaps", "r") else { return nil }
    defer { fclose(file) }
    let target = UInt(bitPattern: address)
    var inside = false
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    defer { free(line) }
    while getline(&line, &capacity, file) > 0, let line {
        let text = String(cString: line)
        if let dash = text.firstIndex(of: "-"), let space = text.firstIndex(of: " "), dash < space,
            let start = UInt(text[..<dash], radix: 16),
            let end = UInt(text[text.index(after: dash)..<space], radix: 16)
        {
            inside = start <= target && target < end
        } else if inside && text.hasPrefix("Rss:") {
            return Int(String(text.filter(\.isNumber)))
        }
    }
    return nil
}

/// The `VmFlags` of this process's mapping of the file at `path` (from /proc/self/smaps: `rr` marks
/// `MADV_RANDOM`, `sr` `MADV_SEQUENTIAL`), or `nil` when the file is not mapped. The first mapping when there are several.
public func vmFlags(ofMappingOf path: String) -> [String]? {
    guard let file = fopen("/proc/self/smaps", "r") else { return nil }
    defer { fclose(file) }
    var inside = false
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    defer { free(line) }
    while getline(&line, &capacity, file) > 0, let line {
        let text = String(cString: line).trimmingSuffix("\n")
        if let dash = text.firstIndex(of: "-"), let space = text.firstIndex(of: " "), dash < space,
            UInt(text[..<dash], radix: 16) != nil
        {
            inside = text.hasSuffix(" " + path)
        } else if inside && text.hasPrefix("VmFlags:") {
            return text.dropFirst("VmFlags:".count).split(separator: " ").map(String.init)
        }
    }
    return nil
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
