/// The rules for ids (user, team, channel, message, device, opId): SPEC §1.
public enum Ids {
    /// Longest id in UTF-8 bytes.
    public static let maxBytes = 128

    /// Why `id` is not a valid id, or `nil` when it is: non-empty, at most 128 bytes, no control characters.
    /// (Invalid UTF-8 never reaches here: the JSON layer reports it as an invalid string.)
    public static func problem(_ id: String) -> String? {
        var count = 0
        for byte in id.utf8 {
            count += 1
            if byte < 0x20 || byte == 0x7F { return "contains a control character" }
        }
        if count == 0 { return "is empty" }
        if count > maxBytes { return "is \(count) bytes, longer than \(maxBytes)" }
        // C1 controls (U+0080–U+009F) are encoded as 0xC2 0x80–0x9F.
        if id.unicodeScalars.contains(where: { (0x80...0x9F).contains($0.value) }) {
            return "contains a control character"
        }
        return nil
    }

    /// True for ids that name tip messages (`tip-<seq>` and `tip-<seq>.<n>`), reserved for the processor.
    public static func isReservedTipId(_ id: String) -> Bool {
        guard id.hasPrefix("tip-") else { return false }
        let parts = id.utf8.dropFirst(4).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else { return false }
        return parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
    }
}
