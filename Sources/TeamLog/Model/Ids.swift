/// The rules for ids (user, team, channel, message, device, opId): SPEC §1.
public enum Ids {
    /// Longest id in UTF-8 bytes.
    public static let maxBytes = 128

    /// Why `id` is not a valid id, or `nil` when it is: non-empty, at most 128 bytes, no control characters.
    /// (Invalid UTF-8 never reaches here: the JSON layer reports it as an invalid string.)
    public static func problem(_ id: String) -> String? {
        if let control = id.utf8.withContiguousStorageIfAvailable(hasControl) {
            if control { return "contains a control character" }
        } else if Array(id.utf8).withUnsafeBufferPointer(hasControl) {
            return "contains a control character"
        }
        let count = id.utf8.count
        if count == 0 { return "is empty" }
        if count > maxBytes { return "is \(count) bytes, longer than \(maxBytes)" }
        return nil
    }

    /// Whether valid UTF-8 `bytes` hold a C0 control, DEL, or a C1 control (U+0080–U+009F, encoded as 0xC2
    /// then 0x80–0x9F: in valid UTF-8 a 0xC2 byte always starts a two-byte scalar) — one pass over the bytes.
    @inline(__always)
    static func hasControl(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var previous: UInt8 = 0
        for byte in bytes {
            if byte < 0x20 || byte == 0x7F || (previous == 0xC2 && byte < 0xA0) { return true }
            previous = byte
        }
        return false
    }

    /// True for ids that name tip messages (`tip-<seq>` and `tip-<seq>.<n>`), reserved for the processor.
    public static func isReservedTipId(_ id: String) -> Bool {
        guard id.hasPrefix("tip-") else { return false }
        let parts = id.utf8.dropFirst(4).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else { return false }
        return parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
    }
}
