/// Appends JSON text to a byte buffer. Deterministic: keys are written in the order given.
public struct JSONWriter: Sendable {
    /// The UTF-8 JSON text written so far.
    public var bytes: [UInt8]

    /// Creates a writer with an empty buffer.
    public init() {
        bytes = []
        // Most of our documents are one short line; this avoids the first few regrowths.
        bytes.reserveCapacity(256)
    }

    /// Writes a value as compact JSON (no spaces). `.invalidString` goes through `writeInvalidString`.
    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null:
            writeRaw("null")
        case .bool(let flag):
            if flag { writeRaw("true") } else { writeRaw("false") }
        case .int(let number):
            writeInt(number)
        case .double(let number):
            writeDouble(number)
        case .string(let text):
            writeString(text)
        case .invalidString(let raw):
            writeInvalidString(raw)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (position, item) in items.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                write(item)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let pairs):
            bytes.append(UInt8(ascii: "{"))
            for (position, pair) in pairs.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                writeString(pair.0)
                bytes.append(UInt8(ascii: ":"))
                write(pair.1)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Writes a quoted string: escapes \" \\ \n \r \t \b \f, other controls as \u00XX, and U+2028/U+2029.
    ///
    /// Everything else, including non-ASCII, is copied as raw UTF-8. U+2028/U+2029 are escaped because they are line
    /// terminators in JavaScript and some line-oriented tools.
    public mutating func writeString(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            appendQuoted(UnsafeRawBufferPointer(utf8))
        }
    }

    /// Writes raw string bytes (as kept by `.invalidString`) as a valid JSON string.
    ///
    /// The bytes are read as the undecoded body of a JSON string: escapes are decoded, unpaired surrogate escapes
    /// and invalid UTF-8 sequences each become U+FFFD, and a malformed escape is kept as literal text. The output
    /// is therefore always valid UTF-8, and parsing it back yields `.string`.
    public mutating func writeInvalidString(_ raw: [UInt8]) {
        writeString(JSONParser.repairedString(raw))
    }

    /// Writes a decimal integer without allocating a String.
    public mutating func writeInt(_ v: Int64) {
        if v < 0 {
            bytes.append(UInt8(ascii: "-"))
        }
        var magnitude = v.magnitude
        if magnitude < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        // 20 digits hold UInt64.max, so Int64.min's magnitude fits.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            while magnitude != 0 {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    /// Writes the shortest text that parses back to the same Double (Swift's `description`); non-finite as null.
    public mutating func writeDouble(_ v: Double) {
        guard v.isFinite else {
            writeRaw("null")
            return
        }
        // Integral values below 2^53 print as "<integer>.0" in `description`; skip the String allocation for them.
        // (Truncate-and-compare rather than `rounded()`/`Int64(exactly:)`, which reference libm's floor/ceil and
        // fail to link in a target that does not otherwise pull libm in.)
        if v.magnitude < 9_007_199_254_740_992, case let whole = Int64(v), Double(whole) == v,
            !(whole == 0 && v.sign == .minus)
        {
            writeInt(whole)
            writeRaw(".0")
            return
        }
        bytes.append(contentsOf: v.description.utf8)
    }

    /// Appends literal text such as `{"kind":` unchanged; the caller is responsible for it being valid JSON.
    public mutating func writeRaw(_ ascii: StaticString) {
        ascii.withUTF8Buffer { text in
            bytes.append(contentsOf: text)
        }
    }

    /// The bytes written so far as a String.
    public var string: String {
        String(decoding: bytes, as: UTF8.self)
    }

    // MARK: - Escaping

    private mutating func appendQuoted(_ utf8: UnsafeRawBufferPointer) {
        bytes.append(UInt8(ascii: "\""))
        let count = utf8.count
        var i = 0
        var runStart = 0
        while i < count {
            // Copy clean stretches in bulk: skip eight bytes at a time while none needs attention.
            if i + 8 <= count {
                let word = utf8.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                if !JSONParser.hasSpecialByte(word) && !JSONWriter.hasByteE2(word) {
                    i += 8
                    continue
                }
            }
            let b = utf8[i]
            let escape: StaticString
            var hexControl = false
            switch b {
            case UInt8(ascii: "\""): escape = "\\\""
            case UInt8(ascii: "\\"): escape = "\\\\"
            case 0x0A: escape = "\\n"
            case 0x0D: escape = "\\r"
            case 0x09: escape = "\\t"
            case 0x08: escape = "\\b"
            case 0x0C: escape = "\\f"
            case 0..<0x20:
                escape = "\\u00"
                hexControl = true
            case 0xE2 where i + 2 < count && utf8[i + 1] == 0x80 && (utf8[i + 2] == 0xA8 || utf8[i + 2] == 0xA9):
                escape = utf8[i + 2] == 0xA8 ? "\\u2028" : "\\u2029"
            default:
                i += 1
                continue
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: utf8[runStart..<i]))
            writeRaw(escape)
            if hexControl {
                let hex: StaticString = "0123456789abcdef"
                hex.withUTF8Buffer { digits in
                    bytes.append(digits[Int(b >> 4)])
                    bytes.append(digits[Int(b & 0xF)])
                }
            }
            i += b == 0xE2 ? 3 : 1
            runStart = i
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: utf8[runStart..<count]))
        bytes.append(UInt8(ascii: "\""))
    }

    /// True when some byte of the word is 0xE2, the lead byte of U+2028/U+2029.
    @inline(__always)
    private static func hasByteE2(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let x = word ^ (ones &* 0xE2)
        return (x &- ones) & ~x & (ones &* 0x80) != 0
    }
}

extension JSONValue {
    /// Compact JSON text.
    public var jsonString: String {
        var writer = JSONWriter()
        writer.write(self)
        return writer.string
    }
}
